# The course in one image, for any laptop with Docker (macOS, Windows, Linux; linux/amd64 and linux/arm64) and for a
# class's hub. Two images from this one file: the instructor's, built from the kit, and the students', built from a
# release (`nmtkit release --out DIR`, then `make image` there). `make image` fills wheelhouse/ first
# (scripts/wheelhouse.sh) and makes it an image: the build installs from it with --no-index, offline, and needs BuildKit
# (DOCKER_BUILDKIT=1) for its bind mounts. The only install path is scripts/setup.sh, with pyproject.toml's pins.
ARG BASE=debian:bookworm-slim
# wheelhouse/ as an image (`make image` makes it: FROM scratch, the wheels at /): read through bind mounts, never
# copied into a layer
ARG WHEELHOUSE=nmtkit-wheelhouse:latest
FROM ${WHEELHOUSE} AS wheelhouse

# --- the builder: a compiler, and Horovod built against the pinned TensorFlow (or set-up's cached wheel) -------------
FROM ${BASE} AS builder
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv python3-dev g++ make && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/nmtkit
# only the pins and the set-up script: a change to the kit or its notebooks never recompiles Horovod
COPY pyproject.toml ./
COPY scripts/setup.sh scripts/
# set-up's Horovod wheel cache, filled on the host (wheelhouse/nmtkit-wheels/), and Horovod's source: a wheel built for
# the same configuration (Horovod, Python, the TensorFlow build, the system: a Debian 12 host's) is reused, else
# set-up compiles it here (2-4 minutes)
# A foreign architecture (HOROVOD_PREBUILT=1: `make image ARCH=arm64` on x86-64) takes the wheel
# scripts/horovod-arm64.sh built in this base under QEMU with set-up's own build (compiled natively over distcc):
# compiled here it would take hours of emulation, and set-up's key would cost a second emulated TensorFlow install.
# The final stage's set-up imports it with TensorFlow, which fails loudly on a wrong build.
ARG HOROVOD_PREBUILT=0
RUN --mount=type=bind,from=wheelhouse,target=/wheelhouse \
    { cp -r /wheelhouse/nmtkit-wheels /tmp/wheels 2>/dev/null || mkdir -p /tmp/wheels; } && \
    if [ "$HOROVOD_PREBUILT" = 1 ]; then \
      w=$(ls /tmp/wheels/horovod-*-cp311-*/horovod-*-linux_$(uname -m).whl | head -1) && mkdir /horovod && \
      cp "$w" /horovod/ && echo "[image] Horovod: $w" || \
      { echo "[image] no cached $(uname -m) Horovod wheel: scripts/horovod-arm64.sh builds it" >&2; exit 1; }; \
    else mkdir -p /tmp/wheels/sdist && cp /wheelhouse/horovod-*.tar.gz /tmp/wheels/sdist/ && \
      PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheelhouse NMTKIT_WHEEL_CACHE=/tmp/wheels NMTKIT_GPU=0 VENV=/opt/venv \
        bash scripts/setup.sh --horovod-wheel-only /horovod; fi

# --- the image students get: no compiler, Horovod's wheel only ------------------------------------------------------
FROM ${BASE}
ARG NB_USER=jovyan
ARG NB_UID=1000
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv make procps iproute2 && rm -rf /var/lib/apt/lists/* && \
    useradd --create-home --shell /bin/bash --uid "${NB_UID}" "${NB_USER}"
ENV NB_USER=${NB_USER} NB_UID=${NB_UID} HOME=/home/${NB_USER} VENV=/opt/venv PATH=/opt/venv/bin:${PATH} \
    TF_USE_LEGACY_KERAS=1 NMTKIT_PROFILE=tiny NMTKIT_COPY_NOTEBOOKS=1
WORKDIR /opt/nmtkit
# the install layers first: the pinned packages (the wheelhouse's requirements.txt, from pyproject.toml) before the
# package itself, so a change to nmtkit/ reinstalls only the kit, not TensorFlow (206-225 s a build on amd64; ~10 min
# for the arm64 image under QEMU); a notebook change rebuilds only the layers after them
RUN --mount=type=bind,from=wheelhouse,target=/wheelhouse \
    python3 -m venv /opt/venv && HOME=/root /opt/venv/bin/python -m pip install -q --no-cache-dir --no-index \
      --find-links /wheelhouse -r /wheelhouse/requirements.txt
COPY pyproject.toml ./
COPY scripts/setup.sh scripts/
COPY nmtkit/ nmtkit/
COPY --from=builder /horovod/ /tmp/horovod/
# HOME=/root: the install's caches and settings (pip, IPython, Jupyter, Keras) never land, root-owned, in the home
# jovyan writes to (`jupyter trust` keeps its database there)
RUN --mount=type=bind,from=wheelhouse,target=/wheelhouse \
    w=$(ls /tmp/horovod/horovod-*.whl) && \
    PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheelhouse NMTKIT_HOROVOD_WHEEL="$w" NMTKIT_EXTRAS=hub NMTKIT_GPU=0 \
      VENV=/opt/venv HOME=/root bash scripts/setup.sh && \
    rm -rf /tmp/horovod /root/.cache /root/.ipython /root/.jupyter /root/.keras /root/.local
# the course itself: everything else of the kit (or the release)
COPY . /opt/nmtkit/
# declared here, not above: an ARG's value is in the environment of every RUN after it, so a new commit would miss
# the cache of the install layers (TensorFlow reinstalled on every build)
ARG KIT_COMMIT=unknown
ARG KIT_KIND=instructor
LABEL org.opencontainers.image.title="nmtkit" org.opencontainers.image.revision="${KIT_COMMIT}" \
      nmtkit.kind="${KIT_KIND}"
# ~/work made here, owned by jovyan: a new named volume mounted on it takes its owner (else root's, and start.sh
# could not copy the course into it). nbgrader's exchange root, 1777 as nbgrader's set-up asks (its fetch and submit
# refuse a root they cannot write): a class's hub mounts only the student's own boxes beneath it (docs/hub.md)
RUN echo "${KIT_COMMIT}" > /opt/nmtkit/COMMIT && \
    install -m 755 docker/start.sh /usr/local/bin/nmtkit-start && chmod -R a+rX /opt/nmtkit && \
    install -d -o "${NB_USER}" -g "${NB_USER}" "/home/${NB_USER}/work" && install -d -m 1777 /srv/nbgrader/exchange
USER ${NB_UID}
WORKDIR /home/${NB_USER}
EXPOSE 8888
ENTRYPOINT ["/usr/local/bin/nmtkit-start"]
CMD ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", "--ServerApp.root_dir=/home/jovyan/work"]
