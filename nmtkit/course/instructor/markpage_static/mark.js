// The grade-by-question page (nmtkit.course.instructor.markpage): plain JS, no build.
"use strict";
const base = location.pathname.replace(/[^/]*$/, "");
const state = { q: null, data: null, cur: 0, selected: new Set() };
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

// behind the hub, every fetch carries the XSRF token the hub's OAuth left in the _xsrf cookie (JupyterHub refuses
// cookie-authenticated fetches without it); standalone there is no such cookie and none is needed
const xsrf = (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1];

async function api(path, body) {
  const headers = xsrf ? { "X-XSRFToken": decodeURIComponent(xsrf) } : {};
  const r = await fetch(base + "api/" + path + location.search, body === undefined ? { headers } :
    { method: "POST", headers: { ...headers, "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.statusText);
  return j;
}

function showProgress(p) {
  $("progress").textContent = `graded ${p.marked} / to grade ${p.to_grade} / unanswered ${p.unanswered}`;
}

async function loadQuestions() {
  const j = await api("questions");
  $("who").textContent = "grader: " + j.grader;
  $("question").innerHTML = j.questions.map((q) =>
    `<option value="${esc(q.grade_id)}">${esc(q.grade_id)} (${q.marked}/${q.marked + q.to_grade})</option>`).join("");
  const want = new URLSearchParams(location.hash.slice(1)).get("q") || (j.questions[0] || {}).grade_id;
  if (want) { $("question").value = want; await loadQuestion(want); }
}

async function loadQuestion(gid) {
  state.q = gid; state.data = await api("question/" + encodeURIComponent(gid));
  state.selected.clear();
  state.cur = Math.max(0, state.data.answers.findIndex((a) => a.answered));
  render();
}

function render() {
  const d = state.data;
  showProgress(d.progress);
  $("rubric").innerHTML = d.items.map((i) => `<span class="item" data-item="${i.item}" title="${esc(i.misconception)}">`
    + `<b>${i.item + 1}</b> ${esc(i.text)} (${i.points})</span>`).join("");
  $("answers").innerHTML = d.answers.map((a, n) => {
    const m = a.mark, given = new Set(m ? m.items : []);
    const figs = Object.entries(a.figures).map(([k, v]) => `${esc(k)} = ${esc(v)}`).join(", ") || "none recorded";
    const flags = a.flags.map(([c, why]) => `<span class="flag" title="${esc(why)}">${esc(c)}</span>`).join("");
    const items = d.items.map((i) => `<span class="item${given.has(i.item) ? " given" : ""}" data-student="${esc(a.student)}"`
      + ` data-item="${i.item}">${i.item + 1}</span>`).join("");
    return `<div class="answer${n === state.cur ? " current" : ""}${state.selected.has(a.student) ? " selected" : ""}`
      + `${a.answered ? "" : " unanswered"}" data-n="${n}" id="a-${esc(a.student)}">`
      + `<b>${esc(a.student)}</b> <span class="meta">${esc(a.variant)}</span> ${a.answered ? "" : "<b>unanswered</b>"} ${flags}`
      + `<div class="text">${esc(a.kind === "hand" ? "(hand-graded check: the figures below)" : a.text)}</div>`
      + `<div class="meta">their figures: ${figs}</div>`
      + `<div class="meta">the kit on their figures: ${esc(a.check_status)} ${esc(a.check_message)}</div>`
      + `<details class="meta"><summary>model verdict</summary>${esc(a.model)}</details>`
      + `<div>${items} <span class="points">${m ? `${m.points} pts by ${esc(m.grader)}` : "not marked"}</span></div>`
      + `<textarea data-student="${esc(a.student)}" placeholder="comment (c)">${esc(m ? m.comment : "")}</textarea></div>`;
  }).join("");
  const cur = document.querySelector(".answer.current");
  if (cur) cur.scrollIntoView({ block: "nearest" });
}

async function save(students, items, comment) {
  const d = state.data, seen = {};
  for (const s of students) { const a = d.answers.find((x) => x.student === s); seen[s] = a.mark ? a.mark.id : null; }
  const j = await api("mark", { grade_id: state.q, students, items, comment, seen });
  // the whole question again: the other graders' marks since this page loaded show too
  state.data = await api("question/" + encodeURIComponent(state.q));
  const c = Object.entries(j.conflicts);
  $("conflict").hidden = !c.length;
  $("conflict").textContent = c.map(([s, m]) => `${s}: ${m.grader} had marked this at ${m.time} `
    + `(items ${m.items.map((i) => i + 1).join(",") || "none"}, "${m.comment}"); yours replaced it.`).join(" ");
  render();
}

function targets() {
  return state.selected.size ? [...state.selected] : [state.data.answers[state.cur].student];
}

function toggle(item, students) {
  const a = state.data.answers.find((x) => x.student === students[0]);
  const given = new Set(a.mark ? a.mark.items : []);
  given.has(item) ? given.delete(item) : given.add(item);
  return save(students, [...given], a.mark ? a.mark.comment : "");
}

function move(step, toGrade) {
  const as = state.data.answers;
  for (let n = state.cur + step; n >= 0 && n < as.length; n += step) {
    if (as[n].answered && (!toGrade || !as[n].mark)) { state.cur = n; render(); return; }
  }
}

document.addEventListener("keydown", (e) => {
  if (e.target.tagName === "TEXTAREA") {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      const s = e.target.dataset.student, a = state.data.answers.find((x) => x.student === s);
      const students = state.selected.has(s) ? [...state.selected] : [s];
      save(students, a.mark ? a.mark.items : [], e.target.value).then(() => e.target.blur());
    } else if (e.key === "Escape") e.target.blur();
    return;
  }
  if (!state.data || e.ctrlKey || e.metaKey || e.altKey) return;
  const k = e.key;
  if (/^[1-9]$/.test(k) && Number(k) <= state.data.items.length) toggle(Number(k) - 1, targets());
  else if (k === "j") move(1, false);
  else if (k === "k") move(-1, false);
  else if (k === "n") move(1, true);
  else if (k === "x") {
    const s = state.data.answers[state.cur].student;
    state.selected.has(s) ? state.selected.delete(s) : state.selected.add(s); render();
  } else if (k === "c") { e.preventDefault(); document.querySelector(".answer.current textarea").focus(); }
});

document.addEventListener("click", (e) => {
  const it = e.target.closest(".item");
  if (!it || !state.data) return;
  const s = it.dataset.student;
  toggle(Number(it.dataset.item), s ? (state.selected.has(s) ? [...state.selected] : [s]) : targets());
});

$("merge").addEventListener("click", () => {
  $("merged").textContent = "merging";
  api("merge", {}).then((j) => { $("merged").textContent = "merged: " + j.grades; })
    .catch((e) => { $("merged").textContent = "merge failed: " + e.message; });
});
$("question").addEventListener("change", (e) => { location.hash = "q=" + e.target.value; loadQuestion(e.target.value); });
loadQuestions().catch((e) => { $("progress").textContent = "error: " + e.message; });
