"""The class's hub with its real parts (issue #58): `make hub` (JupyterHub, DockerSpawner, configurable-http-proxy from
npm, NativeAuthenticator, jupyterhub-idle-culler) spawning containers of the students' image built as course staff
build it, nbgrader's exchange through each student's own boxes, and the kit's collect, grade and feedback. An
instructor and two students come from a roster file. The tests run in this file's order (one hub); what they made is
removed at the end, also on failure."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests
from dockertools import TAG, docker, why_not
from hubtools import Hub
from hubtools import why_not as hub_why_not

pytestmark = pytest.mark.skipif(bool(why_not() or hub_why_not()), reason=str(why_not() or hub_why_not()))
NB01 = "01_data_prep_bpe.ipynb"
GiB = 1024 ** 3


def nmtkit(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "nmtkit.cli", *args], capture_output=True, text=True, timeout=timeout)
    said = out.stdout[-2000:] + out.stderr[-2000:]
    assert out.returncode == 0, f"nmtkit {' '.join(args)}: rc {out.returncode}\n{said}"
    return out


@pytest.fixture(scope="module")
def hub(image, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hub")
    instructor_image = f"{TAG.split(':')[0]}-instructor:latest"  # a second name: which image the instructor gets
    docker("tag", TAG, instructor_image)
    h = Hub(tmp / "state", TAG, instructor_image, tmp / "hub.log")
    h.release = image  # the release the image was built from: its notebooks are the assignment
    try:
        start = time.time()
        printed = h.start()
        h.started_in = time.time() - start
        assert f"serving the course at http://127.0.0.1:{h.port}/" in printed, printed[-2000:]
        h.roster(tmp / "roster.csv")
        yield h
    finally:
        h.remove_all()
        docker("rmi", instructor_image, check=False)
        print(f"[hub] first start (make hub: venv, npm, hub) {getattr(h, 'started_in', 0):.0f} s")


def test_secrets_are_the_hubs_alone_and_outside_the_repository(hub):
    for name in ("jupyterhub_cookie_secret", "proxy_auth_token"):
        path = hub.state / name
        assert path.stat().st_mode & 0o777 == 0o600, oct(path.stat().st_mode)
    assert not list(Path(__file__).resolve().parents[2].joinpath("hub").glob("*secret*"))


def test_each_login_gets_a_container_of_its_image_with_the_limits_and_its_own_uid(hub):
    for user in [hub.instructor, *hub.students]:
        hub.login(user)
        hub.spawn(user)
    uids = set()
    for user in [hub.instructor, *hub.students]:
        info = json.loads(docker("inspect", hub.container(user)).stdout)[0]
        want = hub.instructor_image if user == hub.instructor else hub.image
        assert info["Config"]["Image"] == want, (user, info["Config"]["Image"])
        host = info["HostConfig"]  # DockerSpawner's cpu_limit is a CFS quota over its period
        assert host["CpuQuota"] == 2 * host["CpuPeriod"] > 0 and host["Memory"] == 4 * GiB, host
        top = docker("top", hub.container(user), "-eo", "pid,uid,args").stdout.splitlines()
        server = [line.split()[1] for line in top if "jupyterhub-singleuser" in line]
        assert server and server[0] != "0", top  # the server runs as the user's uid, not root
        uids.add(server[0])
        env = docker("exec", hub.container(user), "printenv", "NMTKIT_STUDENT_ID").stdout.strip()
        assert env == user  # the student's variant follows their hub name
    assert len(uids) == 3, uids


def test_a_students_token_is_refused_on_anothers_server(hub):
    alice, bob = hub.students
    assert hub.server("GET", alice, "api/contents").status_code == 200
    assert hub.server("GET", bob, "api/contents", as_user=alice).status_code == 403
    assert hub.api("GET", f"/users/{bob}", alice).status_code in (403, 404)


def test_release_fetch_and_submit_through_each_students_server(hub):
    due = (datetime.now(timezone.utc) + timedelta(days=7)).strftime("%Y-%m-%d %H:%M")
    nmtkit("hub", "release", "--release", str(hub.release), "--assignment", "hw1", "--due", due,
           "--state", str(hub.state), "--course", hub.course)
    from solutions import put_solutions
    solved = put_solutions(hub.release / "notebooks", hub.state.parent / "solved")
    for user in hub.students:  # what the Assignments tab does: the server's nbgrader handlers
        r = hub.server("POST", user, "assignments/fetch", data={"course_id": hub.course, "assignment_id": "hw1"})
        assert r.ok and json.loads(r.text)["success"], r.text[-1000:]
    alice, bob = hub.students
    answered = json.loads((solved / NB01).read_text())
    r = hub.server("PUT", alice, f"api/contents/hw1/{NB01}", json={"type": "notebook", "content": answered})
    assert r.ok, r.text[-500:]  # alice saves her answers as JupyterLab would; bob submits the notebook as fetched
    for user in hub.students:
        r = hub.server("POST", user, "assignments/submit", data={"course_id": hub.course, "assignment_id": "hw1"})
        assert r.ok and json.loads(r.text)["success"], r.text[-1000:]
    for user in hub.students:
        subs = list((hub.exchange / "inbound" / user).iterdir())
        assert [p.name.split("+")[:2] for p in subs] == [[user, "hw1"]], subs


def test_from_inside_a_container_another_students_work_is_out_of_reach(hub):
    alice, bob = hub.students
    inbound = f"/srv/nbgrader/exchange/{hub.course}/inbound"
    listing = hub.exec_as_user(alice, "ls", "-a", inbound).stdout.split()
    assert listing and all(bob not in name for name in listing), listing
    mounts = json.loads(docker("inspect", hub.container(alice)).stdout)[0]["Mounts"]
    assert not [m["Source"] for m in mounts if bob in m["Source"] or m["Source"] == str(hub.exchange)], mounts
    host_box = hub.exchange / "inbound" / bob
    before = sorted(p.relative_to(host_box) for p in host_box.rglob("*"))
    tries = (["ls", str(host_box)], ["cat", f"{host_box}/x"], ["touch", f"{host_box}/x"], ["rm", "-r", str(host_box)],
             ["find", "/srv", "/home", "/tmp", "/mnt", "-name", f"{bob}+*"])
    for cmd in tries:
        out = hub.exec_as_user(alice, *cmd)
        assert out.returncode != 0 or not out.stdout.strip(), (cmd, out.stdout[-500:])
    assert sorted(p.relative_to(host_box) for p in host_box.rglob("*")) == before  # bob's box as it was
    feedback = f"/srv/nbgrader/exchange/{hub.course}/feedback"
    assert hub.exec_as_user(alice, "touch", f"{feedback}/x.html").returncode != 0  # read-only
    # submitting as bob from alice's container: nbgrader names it bob's, but it lands in alice's box
    out = hub.exec_as_user(alice, "env", f"JUPYTERHUB_USER={bob}", "nbgrader", "submit", "hw1",
                           f"--course={hub.course}", f"--student={bob}")
    assert len(list((hub.exchange / "inbound" / bob).iterdir())) == 1  # bob's box holds bob's own submission only
    hub.forged = [p.name for p in (hub.exchange / "inbound" / alice).iterdir() if p.name.startswith(f"{bob}+")]
    assert hub.forged, (out.stdout[-500:], out.stderr[-1000:])


def test_collect_grade_and_each_student_sees_only_their_own_feedback(hub):
    alice, bob = hub.students
    course_dir, out_dir = hub.state.parent / "course", hub.state.parent / "grades"
    collected = nmtkit("hub", "collect", "--assignment", "hw1", "--course-dir", str(course_dir),
                       "--state", str(hub.state), "--course", hub.course).stdout
    assert hub.forged[0] in collected and "late" not in collected.replace("not late", ""), collected
    assert sorted(p.name for p in (course_dir / "submitted").iterdir() if p.is_dir()) == sorted(hub.students)
    nmtkit("grade", "--class", str(course_dir), "--out", str(out_dir), "--only", "01", "--image", TAG)
    import pandas as pd
    grades = pd.read_csv(out_dir / "grades.csv", dtype={"student": str}).set_index("student")
    assert grades.loc[alice, "points"] == grades.loc[alice, "max_points"] > 0, grades
    assert grades.loc[bob, "points"] < grades.loc[alice, "points"], grades
    nmtkit("hub", "feedback", "--assignment", "hw1", "--course-dir", str(course_dir), "--grades", str(out_dir),
           "--state", str(hub.state), "--course", hub.course)
    seen = {}
    for user in hub.students:
        r = hub.server("POST", user, "assignments/fetch_feedback",
                       data={"course_id": hub.course, "assignment_id": "hw1"})
        assert r.ok and json.loads(r.text)["success"], r.text[-1000:]
        found = hub.exec_as_user(user, "sh", "-c", "cat hw1/feedback/*/*.html").stdout
        assert "01_data_prep_bpe" in found, found[-500:]
        seen[user] = found
    for user, text in seen.items():  # the feedback's heading: "<notebook>: <points> / <max points>"
        got = re.findall(r"01_data_prep_bpe(?:\.ipynb)?: ([\d.]+) / ([\d.]+)", text)
        want = (grades.loc[user, "points"], grades.loc[user, "max_points"])
        assert [tuple(map(float, g)) for g in got] == [tuple(map(float, want))], (user, got, want)
    assert bob not in seen[alice] and alice not in seen[bob]


def test_chromium_logs_in_through_the_hub_and_runs_notebook_01(hub, tmp_path):
    from labpage import CHROMIUM, LAB_READY_JS, Chromium, open_notebook, run_first_code_cell
    if CHROMIUM is None:
        pytest.skip("headless Chromium not installed: sudo apt-get install -y chromium")
    alice = hub.students[0]
    browser = Chromium(tmp_path)
    try:
        browser.navigate(f"{hub.url}/hub/login")
        assert browser.poll("JSON.stringify(!!document.querySelector('input[name=password]'))", bool, timeout=60)
        browser.evaluate(f"""(() => {{ document.querySelector('input[name=username]').value = {json.dumps(alice)};
            document.querySelector('input[name=password]').value = {json.dumps(hub.passwords[alice])};
            document.querySelector('form').submit(); return 'sent'; }})()""")
        assert browser.poll(LAB_READY_JS, bool, timeout=180), "JupyterLab did not open after the hub's login"
        where = browser.evaluate("location.pathname")
        assert where.startswith(f"/user/{alice}/"), where
        state = open_notebook(browser, NB01)
        assert state and state["kernel"] == "nmtkit", state
        out = run_first_code_cell(browser, NB01)
        assert out and out["count"] and "profile tiny" in out["text"] and "Error" not in out["text"], out
    finally:
        browser.close()


def _mark(hub, user: str, text: str) -> None:
    nb = hub.server("GET", user, f"api/contents/{NB01}").json()["content"]
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": text})
    assert hub.server("PUT", user, f"api/contents/{NB01}", json={"type": "notebook", "content": nb}).ok


def _has(hub, user: str, text: str) -> bool:
    return text in json.dumps(hub.server("GET", user, f"api/contents/{NB01}").json()["content"])


def _up(hub, user: str) -> bool:
    """The hub says the server is ready and it answers (a killed one's address may just hang: a short timeout)."""
    try:
        return bool(hub.ready(user)) and hub.server("GET", user, "api/status", timeout=10).status_code == 200
    except requests.RequestException:
        return False


def test_stopped_killed_and_culled_servers_keep_the_students_work(hub):
    alice = hub.students[0]
    _mark(hub, alice, "edited before stop")
    assert hub.api("DELETE", f"/users/{alice}/server", alice).status_code in (202, 204)
    hub.wait(alice, False)
    hub.spawn(alice)
    assert _has(hub, alice, "edited before stop")
    # killed from outside: the student's next visit (the hub's page for a server that is not running) starts it
    docker("kill", hub.container(alice))
    s, deadline = hub.login(alice), time.time() + 300
    while not _up(hub, alice):
        # the visit: the hub polls the server, finds its container gone and shows its "not running" page, whose
        # script starts it again after 2 s (what the GET of /hub/spawn does here)
        s.get(f"{hub.url}/hub/user/{alice}/lab", timeout=60, allow_redirects=False)
        if hub.ready(alice) is False:
            s.get(f"{hub.url}/hub/spawn/{alice}", timeout=120)
        assert time.time() < deadline, hub.log.read_text()[-2000:]
        time.sleep(2)
    assert _has(hub, alice, "edited before stop")
    # the hub restarted, now culling after 20 s idle: the running server is found again, then culled; the work stays
    hub.stop()
    hub.start(cull=20)
    assert _up(hub, alice)
    _mark(hub, alice, "edited before cull")
    culled_in = hub.wait(alice, False, timeout=240)
    assert docker("ps", "-q", "--filter", f"name={hub.container(alice)}").stdout.strip() == ""
    hub.spawn(alice)
    assert _has(hub, alice, "edited before cull")
    print(f"[hub] culled after {culled_in:.0f} s idle")
