# Sourced by scripts/setup and scripts/check-k8s: the pinned manifest validator for deploy/k8s/.
#
# kubernetes-validate (PyPI) checks each manifest against the JSON schemas of the Kubernetes
# versions it ships inside its wheel (1.25.0 to 1.37.0 in 1.37.0), offline: nothing is fetched at
# validation time. It goes into a venv of its own, .tools/k8s-validate-venv, kept when it already
# has the pinned version. check-k8s installs it too when it is missing, since scripts/test runs
# check-k8s before scripts/setup.

# The validator's release; its own version is also the newest Kubernetes it has schemas for.
K8S_VALIDATE_VERSION=1.37.0
k8s_validate_venv=.tools/k8s-validate-venv
k8s_validate_bin=$k8s_validate_venv/bin/kubernetes-validate

# The validator's version in the venv, or nothing when it is missing or broken.
k8s_validate_version() {
  "$k8s_validate_venv/bin/python" -c 'import importlib.metadata as m; print(m.version("kubernetes-validate"))' \
    2>/dev/null || true
}

# Installs kubernetes-validate==$K8S_VALIDATE_VERSION into the venv unless it is there already.
# Run from the repository's root. Exits 1 when pip fails or installs another version.
k8s_validate_install() {
  if [ "$(k8s_validate_version)" = "$K8S_VALIDATE_VERSION" ]; then
    return 0
  fi
  echo "${0##*/}: installing kubernetes-validate==$K8S_VALIDATE_VERSION into $k8s_validate_venv" >&2
  # --clear: a venv left half-made by an interrupted install is made again, not patched.
  python3 -m venv --clear "$k8s_validate_venv"
  if ! "$k8s_validate_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "kubernetes-validate==$K8S_VALIDATE_VERSION"; then
    echo "${0##*/}: error: pip could not install kubernetes-validate==$K8S_VALIDATE_VERSION (pip's message above)" >&2
    exit 1
  fi
  if [ "$(k8s_validate_version)" != "$K8S_VALIDATE_VERSION" ]; then
    echo "${0##*/}: error: $k8s_validate_venv has kubernetes-validate '$(k8s_validate_version)', not $K8S_VALIDATE_VERSION" >&2
    exit 1
  fi
}
