"""`make hub-roster ROSTER=roster.csv` (hub/.venv/bin/python hub/roster.py ROSTER): the class's accounts from a CSV
with a `username` column (and optionally `email`). For each new student: a NativeAuthenticator account (authorized,
a random first password), their exchange boxes, and their name in the hub's allowed users (read by OAuth setups);
the new passwords go to `$NMTKIT_HUB_STATE/initial-passwords.csv` (0600) to hand out. Existing accounts are left
as they are. Runs where the hub runs, with the hub's state directory (docs/hub.md)."""
import csv
import os
import re
import secrets
import sys
from pathlib import Path

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")  # a hub name that is also a Docker volume name's tail


def read_roster(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "username" not in rows[0]:
        sys.exit(f"{path}: no `username` column; the first line must be a header such as `username,email`")
    seen = set()
    for line, row in enumerate(rows, start=2):
        name = (row.get("username") or "").strip()
        if not NAME.match(name) or name in seen:
            why = "appears twice" if name in seen else "is not a lower-case name of letters, digits, . _ -"
            sys.exit(f"{path}:{line}: username {name!r} {why}; fix that line and run again (nothing was changed)")
        seen.add(name)
        row["username"] = name
    return rows


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        sys.exit("usage: roster.py ROSTER.csv")
    rows = read_roster(Path(argv[0]))
    import bcrypt
    from nativeauthenticator.orm import Base, UserInfo
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session
    state = Path(os.environ.get("NMTKIT_HUB_STATE", Path.home() / ".local/share/nmtkit-hub"))
    course = os.environ.get("NMTKIT_HUB_COURSE", "nmtkit")
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    engine = create_engine(f"sqlite:///{state / 'jupyterhub.sqlite'}")
    Base.metadata.create_all(engine, tables=[UserInfo.__table__])
    new = []
    with Session(engine) as db:
        for row in rows:
            name = row["username"]
            if UserInfo.find(db, name) is None:
                password = secrets.token_urlsafe(12)
                db.add(UserInfo(username=name, password=bcrypt.hashpw(password.encode(), bcrypt.gensalt()),
                                is_authorized=True, email=(row.get("email") or "").strip() or None))
                new.append((name, password))
            for box in ("inbound", "feedback"):
                (state / "exchange" / course / box / name).mkdir(parents=True, exist_ok=True, mode=0o700)
        db.commit()
    allowed = state / "allowed_users"
    names = sorted(set(allowed.read_text().split() if allowed.exists() else []) | {r["username"] for r in rows})
    tmp = allowed.with_suffix(".tmp")
    tmp.write_text("\n".join(names) + "\n")
    tmp.replace(allowed)
    if new:
        out = state / "initial-passwords.csv"
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as f:
            f.writelines(f"{name},{password}\n" for name, password in new)
    print(f"[roster] {len(rows)} students, {len(new)} new accounts"
          + (f"; their first passwords are in {state / 'initial-passwords.csv'} (0600)" if new else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
