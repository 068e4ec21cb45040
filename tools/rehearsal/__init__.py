"""The homework's two-VM path rehearsed on one machine: two network namespaces reached over real SSH.

netns.py: the two hosts (sshd, own host names, tc-limited data link); link.py: the measured link; ssh.py:
ipyparallel's SSH launcher pointed at them; run.py: the rehearsal and its report (`python -m tools.rehearsal`).
"""
