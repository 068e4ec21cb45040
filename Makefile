# nmtkit: two commands on a fresh machine.
#   make demo   set up .venv (TensorFlow, Horovod build, everything) and run the course (tiny profile) as far as
#               the answers go: a student's unanswered exercises are listed, the cells needing them skipped
#   make test   the same set-up, then the unit tests and the notebooks under nbval (the quick one)
#   make test-all  make test, the long tier, then the heavy suites of tests/heavy/ and a time budget (CI: .ci/run)
#   make lab    JupyterLab on 127.0.0.1 with the 'nmtkit' kernel
#   make student  course staff: student copies of the notebooks (solutions removed) in student/
#
# The Python environment every target uses, the first that applies: VENV=dir (command line or environment); the
# one `make setup` last set up, recorded in .nmtkit-venv; an active conda env holding the kit ($CONDA_PREFIX/bin/nmtkit,
# as environment.yml installs it); else .venv. So after `make setup VENV=$CONDA_PREFIX`, a plain `make lab` uses that
# env instead of setting up a second stack in .venv.
RECORD := $(dir $(abspath $(lastword $(MAKEFILE_LIST)))).nmtkit-venv
ifeq ($(filter command line environment,$(origin VENV)),)
VENV := $(shell cat '$(RECORD)' 2>/dev/null)
VENV_FROM := $(if $(VENV),$(RECORD))
ifeq ($(VENV),)
VENV := $(if $(CONDA_PREFIX),$(patsubst %/bin/nmtkit,%,$(wildcard $(CONDA_PREFIX)/bin/nmtkit)))
VENV_FROM := $(if $(VENV),the active conda env)
endif
VENV := $(or $(VENV),.venv)
endif
PY := $(VENV)/bin/python
export NMTKIT_PROFILE ?= tiny
export TF_USE_LEGACY_KERAS := 1
UNIT_WORKERS ?= 3
# No TF_CPP_MIN_LOG_LEVEL here: set for every process make starts, it hid TensorFlow's "Cannot dlopen some GPU
# libraries", one of the two clues a broken GPU driver gives. `import nmtkit` sets its own default.
# the venv's tools (tensorboard, ipengine, jupyter) for kernels and engines, without activating it
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: setup demo test test-all unit long notebooks lab trust student doctor bench clean rehearsal gpu-check image image-save \
	image-index test-arm64 hub hub-roster

# Records a non-default env for the next make (atomically: temp file + rename); the default .venv clears the record.
setup:
	@$(if $(VENV_FROM),echo "[make] environment $(VENV) (from $(VENV_FROM)); \`make setup VENV=.venv\` goes back")
	@VENV='$(VENV)' bash scripts/setup.sh
	@$(if $(filter $(abspath .venv),$(abspath $(VENV))),rm -f '$(RECORD)',\
		printf '%s\n' '$(abspath $(VENV))' > '$(RECORD).tmp' && mv -f '$(RECORD).tmp' '$(RECORD)')

# COURSE_ARGS=--until-first: each notebook only up to its first unanswered exercise (the exercises still listed)
demo: setup
	$(VENV)/bin/nmtkit course$(if $(COURSE_ARGS), $(COURSE_ARGS))

# the unit tests and the notebooks side by side (scripts/test.sh says why), each suite's log printed whole
test: setup
	@bash scripts/test.sh

# what CI runs (.ci/run): `make test`, then the heavy suites in tests/heavy/ (Docker images, the release's set-up, GPU-mode build)
test-all: setup
	@PY='$(PY)' bash scripts/test-all.sh

# UNIT_WORKERS workers (3 on 2 cores: while one waits on a deadline or a launch, the others keep both cores busy; 2
# left a core idle ~15% of the run), a test file per worker at a time (module fixtures and a file's order hold);
# the slowest 15 listed
unit:
	$(PY) -m pytest tests/ --ignore=tests/heavy -m "not long" -q -n $(UNIT_WORKERS) --dist loadfile --durations=15 \
		--junitxml=.test-logs/unit.xml

# The long tier (tests/conftest.py's LONG: integration tests of a minute or more each); `make test-all` runs it. A
# student release has none of them (pytest's exit 5: nothing selected), which is no failure
long: setup
	$(PY) -m pytest tests/ --ignore=tests/heavy -m long -q -n $(UNIT_WORKERS) --dist loadfile --durations=15 \
		--junitxml=.test-logs/long.xml; rc=$$?; [ $$rc -eq 5 ] || exit $$rc

# Grading mode: every notebook runs in order; NBVAL_CHECK_OUTPUT cells must match their committed outputs.
notebooks:
	$(PY) -m pytest -q --nbval-lax --nbval-current-env --nbval-cell-timeout=900 \
		--nbval-sanitize-with notebooks/sanitize.cfg -p no:cacheprovider --junitxml=.test-logs/notebooks.xml notebooks/

# The shipped notebooks are trusted here (by content: re-run after editing one), else JupyterLab shows their saved
# widgets (live panel, progress bar, translation box) as text such as `HTML(value=...)`. Idempotent.
trust: setup
	$(VENV)/bin/jupyter trust notebooks/[0-9][0-9]_*.ipynb

lab: setup trust
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --no-browser $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

# Student copies: every solution block (between the BEGIN and END SOLUTION markers) becomes `raise NotImplementedError`,
# outputs cleared. STUDENT=dir to write elsewhere.
STUDENT ?= student
student: setup
	$(VENV)/bin/nmtkit student --out $(STUDENT)

doctor: setup
	$(VENV)/bin/nmtkit doctor

# Course staff, first thing on a GPU VM: set-up (GPU mode when nvidia-smi lists a GPU), then bench/gpu.py, which exits
# non-zero when any case fails and leaves gpu-report.md and gpu-report.json here (GPU_REPORT=dir to write elsewhere).
GPU_REPORT ?= .
gpu-check: setup
	$(PY) bench/gpu.py --out $(GPU_REPORT)

bench: setup
	for b in bench/[!_]*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The two-VM path on one machine (root, openssh-server): two SSH-reached hosts, 4 ranks; see docs/rehearsal.md.
rehearsal: setup
	$(PY) -m tools.rehearsal

# The course as one container image (Dockerfile; README.md says how students run it). Built from the kit it is the
# instructor's image; from a release (`nmtkit release --out DIR`, then `make image` in DIR) the students'. Needs
# Debian's docker.io (DOCKER=/usr/bin/docker: BuildKit) and the base image (scripts/base-image.sh: pulled, or made
# from Debian's packages where no registry is reachable); the Python packages come from wheelhouse/, filled here.
DOCKER ?= /usr/bin/docker
KIND := $(if $(wildcard nmtkit/course/instructor/__init__.py),instructor,students)
IMAGE ?= nmtkit-$(KIND)$(FOREIGN):latest
KIT_COMMIT ?= $(shell cat COMMIT 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)
# ARCH=arm64 on an x86-64 host: the same Dockerfile under QEMU (qemu-user-static, binfmt-support); a foreign base
# cannot share the native one's tag here (one local image store), so it is tagged debian:bookworm-slim-arm64
HOST_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
ARCH ?= $(HOST_ARCH)
FOREIGN := $(if $(filter $(HOST_ARCH),$(ARCH)),,-$(ARCH))
BASE ?= debian:bookworm-slim$(FOREIGN)
WHEELHOUSE ?= wheelhouse$(FOREIGN)
image:
	DOCKER=$(DOCKER) BASE=$(BASE) ARCH=$(ARCH) bash scripts/base-image.sh
	WHEELHOUSE='$(WHEELHOUSE)' ARCH=$(ARCH) PY=$(if $(wildcard $(PY)),$(PY),python3) bash scripts/wheelhouse.sh
	$(call WHEELHOUSE_BUILD,) || { echo "$(STALE_CACHE)"; $(call WHEELHOUSE_BUILD,--no-cache); }
	$(call IMAGE_BUILD,) || { echo "$(STALE_CACHE)"; $(call IMAGE_BUILD,--no-cache); }
# A build that fails is tried once more without BuildKit's cache: a cache entry can outlive its layer (a prune, a
# copied /var/lib/docker) and then every build fails with "layer does not exist" until the cache is bypassed
STALE_CACHE := [image] the build failed; once more without Docker's build cache (an entry can outlive its layer)
WHEELHOUSE_BUILD = printf 'FROM scratch\nCOPY . /\n' | DOCKER_BUILDKIT=1 $(DOCKER) build $(1) -q \
	--platform linux/$(ARCH) -t nmtkit-wheelhouse$(FOREIGN):latest -f - '$(WHEELHOUSE)'
IMAGE_BUILD = DOCKER_BUILDKIT=1 $(DOCKER) build $(1) --network host --platform linux/$(ARCH) --build-arg BASE=$(BASE) \
	--build-arg WHEELHOUSE=nmtkit-wheelhouse$(FOREIGN):latest --build-arg KIT_COMMIT=$(KIT_COMMIT) \
	--build-arg KIT_KIND=$(KIND) $(if $(FOREIGN),--build-arg HOROVOD_PREBUILT=1) -t $(IMAGE) .

# The image as one file to hand out (USB stick, course page): `docker load -i nmtkit-image.tar.gz` on the laptop. One
# file per architecture (a file of both would double every student's download): `make image-save ARCH=arm64` writes
# the Apple Silicon one, nmtkit-image-arm64.tar.gz
IMAGE_FILE ?= nmtkit-image$(FOREIGN).tar.gz
# (pigz, where installed, gzips on every core: the same format)
GZIP_TOOL := $(shell command -v pigz 2>/dev/null || echo gzip)
image-save:
	$(DOCKER) save $(IMAGE) | $(GZIP_TOOL) -1 > $(IMAGE_FILE).tmp && mv $(IMAGE_FILE).tmp $(IMAGE_FILE)

# One name for both architectures (an OCI index: `docker pull NAME` gives each laptop its own): both images pushed
# to the registry NAME names, e.g. `make image-index NAME=registry.example.org/course/nmtkit:2026` (scripts/image-index.sh)
image-index:
	NAME='$(NAME)' AMD64='nmtkit-$(KIND):latest' ARM64='nmtkit-$(KIND)-arm64:latest' DOCKER=$(DOCKER) \
		bash scripts/image-index.sh

# The arm64 image under QEMU: CI's suite (uname, imports, doctor, 3 steps, the library's ELF, one name for both), then
# notebook 01 to its first exercise and two Horovod ranks over Gloo (tests/heavy/test_arm64_course.py): ~10 min with
# the images built (bench/README.md, issue 73)
test-arm64: setup
	$(PY) -m pytest tests/heavy/test_arm64.py tests/heavy/test_arm64_course.py -q -s -rs -p no:cacheprovider

clean:
	rm -rf notebooks/workspace runs .pytest_cache student

# The class's JupyterHub (docs/hub.md): its own venv and proxy in hub/, then the hub in the foreground at the printed
# address (needs Docker and the students' image, `make image`)
hub:
	DOCKER=$(DOCKER) bash hub/start.sh

# The class's accounts from a CSV (username[,email]): `make hub-roster ROSTER=roster.csv` (hub/roster.py)
hub-roster:
	hub/.venv/bin/python hub/roster.py '$(ROSTER)'
