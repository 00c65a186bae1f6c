# Shared by the setup scripts (sourced, not run). Each setup step:
#   - logs to stderr and prints only `export` lines on stdout;
#   - fails loudly: `die` names what it tried and what it found, and on any non-zero exit the
#     step writes $BENCH360_HOME/<name>.failed with its last error (the tests read it to say the
#     real cause of a missing component) and removes its stale <name>.env (ENV_NAME, e.g.
#     `browser` for browser.env; default: the step's name);
#   - installs Debian packages by series and minimum version (apt_install), never by an exact
#     build that the next security update removes, and records what it installed in
#     $BENCH360_HOME/installed-versions.txt.
# Usage: STEP=setup-browser ENV_NAME=browser; . "$(dirname "$0")/lib/setup.sh"

: "${STEP:?set STEP before sourcing setup.sh}"
ENV_NAME="${ENV_NAME:-$STEP}"
HOME_DIR="${BENCH360_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/bench360}"
mkdir -p "$HOME_DIR"
SETUP_LAST_ERROR=""

log() { printf '[%s] %s\n' "$STEP" "$*" >&2; }
die() {
  SETUP_LAST_ERROR="$*"
  printf '[%s] error: %s\n' "$STEP" "$*" >&2
  exit 1
}

setup_on_exit() {
  local rc=$?
  if [ "$rc" != 0 ]; then
    {
      echo "scripts/$STEP.sh exited $rc on $(date -u +%FT%TZ)"
      echo "${SETUP_LAST_ERROR:-its cause is in the output above this line (the failing command printed it)}"
    } >"$HOME_DIR/$ENV_NAME.failed"
    rm -f "$HOME_DIR/$ENV_NAME.env"
    printf '[%s] FAILED (exit %s); cause kept in %s\n' "$STEP" "$rc" "$HOME_DIR/$ENV_NAME.failed" >&2
  else
    rm -f "$HOME_DIR/$ENV_NAME.failed"
  fi
}
trap setup_on_exit EXIT
# A command that fails under `set -e` without a `die` is named in the .failed file.
set -E
setup_on_err() {
  local rc=$1 line=$2 cmd=$3
  [ -n "$SETUP_LAST_ERROR" ] || SETUP_LAST_ERROR="\`$cmd\` exited $rc (line $line of ${BASH_SOURCE[1]##*/})"
}
trap 'setup_on_err $? $LINENO "$BASH_COMMAND"' ERR

# Writes the step's env file atomically from stdin and prints it (stdout: for `eval`).
write_env() {
  cat >"$HOME_DIR/$ENV_NAME.env.tmp"
  mv "$HOME_DIR/$ENV_NAME.env.tmp" "$HOME_DIR/$ENV_NAME.env"
  cat "$HOME_DIR/$ENV_NAME.env"
}

# Creates the virtual environment VENV with Python ${PYTHON:-python3} from two hash-pinned
# requirement files: REQ (wheels only; it pins the setuptools the second step builds with)
# and REQ_SDIST (packages PyPI has only as source distributions, built in the venv itself
# with no build isolation, so pip fetches no unpinned build tools). The caller checks the
# result and marks it complete.
make_venv() { # venv req req_sdist
  local venv=$1 req=$2 req_sdist=$3 py="${PYTHON:-python3}"
  log "creating $venv"
  rm -rf "$venv"
  "$py" -m venv "$venv" >&2 || die "$py -m venv failed (Debian: apt-get install python3-venv)"
  local pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes)
  "${pip[@]}" --only-binary :all: -r "$req" >&2 || die "pip install -r $req failed (pip's error is above)"
  "${pip[@]}" --no-binary :all: --no-build-isolation --use-pep517 -r "$req_sdist" >&2 ||
    die "pip install -r $req_sdist failed (pip's error is above)"
}

# Records one installed component: name, version, where it came from.
record_version() { # name version source
  local file="$HOME_DIR/installed-versions.txt"
  touch "$file"
  grep -v "^$1 " "$file" >"$file.tmp" || true
  printf '%s %s %s\n' "$1" "$2" "$3" >>"$file.tmp"
  sort -o "$file.tmp" "$file.tmp"
  mv "$file.tmp" "$file"
  log "using $1 $2 ($3)"
}

deb_installed() { { dpkg-query -W -f='${db:Status-Abbrev} ${Version}' "$1" 2>/dev/null || true; } | sed -n 's/^ii *//p'; }

# The Debian release this machine runs must be the series the pins are for.
require_debian() { # version-id (e.g. 12)
  local id ver
  id=$(. /etc/os-release 2>/dev/null && echo "${ID:-}")
  ver=$(. /etc/os-release 2>/dev/null && echo "${VERSION_ID:-}")
  [ "$id" = debian ] && [ "$ver" = "$1" ] ||
    die "needs Debian $1 (its apt series is what the package pins are for); this machine is ${id:-unknown} ${ver:-?} (/etc/os-release)"
}

# apt_install PKG MIN [BELOW]: PKG at version >= MIN (and < BELOW, when given) from this
# Debian release's archives, security updates included. An installed version in range is kept;
# otherwise the candidate apt offers is installed if it is in range. Fails naming what apt offers.
apt_updated=0
apt_install() {
  local pkg=$1 min=$2 below=${3:-} have cand
  in_range() {
    [ -n "$1" ] && dpkg --compare-versions "$1" ge "$min" &&
      { [ -z "$below" ] || dpkg --compare-versions "$1" lt "$below"; }
  }
  local want=">= $min${below:+, < $below}"
  have=$(deb_installed "$pkg")
  if ! in_range "$have"; then
    [ "$(id -u)" = 0 ] || die "$pkg ($want) is needed and installing it needs root (apt-get); installed: ${have:-none}"
    if [ "$apt_updated" = 0 ]; then
      log "apt-get update"
      apt-get update -qq >&2 || die "apt-get update failed (needed to install $pkg $want)"
      apt_updated=1
    fi
    cand=$(apt-cache policy "$pkg" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
    if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
      die "apt offers no $pkg (wanted $want); apt-cache policy $pkg says: $(apt-cache policy "$pkg" 2>&1 | tr '\n' ' ')"
    fi
    in_range "$cand" ||
      die "apt offers $pkg $cand, outside the pinned range $want; versions apt knows: $(apt-cache madison "$pkg" 2>/dev/null | awk -F'|' '{gsub(/ /,"",$2); printf "%s ", $2}')"
    log "installing $pkg=$cand (pinned $want)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg=$cand" >&2 ||
      die "apt-get install $pkg=$cand failed (its error is above)"
    have=$(deb_installed "$pkg")
    in_range "$have" || die "after installing, dpkg reports $pkg '${have:-not installed}', not $want"
  fi
  record_version "$pkg" "$have" "debian $want"
}
