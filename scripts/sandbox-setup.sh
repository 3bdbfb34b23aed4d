#!/usr/bin/env bash
# Make the code sandbox work on this machine (a CI runner), or say why it cannot.
#
# regress runs model-written code under bubblewrap, as an unprivileged user, through user
# namespaces (docs/guarantees.md, "The code sandbox"). This installs bubblewrap where it is
# missing, then asks regress itself whether every containment layer applies. On Ubuntu 24.04
# (GitHub's ubuntu-latest) AppArmor restricts unprivileged user namespaces
# (kernel.apparmor_restrict_unprivileged_userns=1) and bwrap fails with "setting up uid map:
# Permission denied"; then this installs an AppArmor profile that lets /usr/bin/bwrap, and only
# it, create them (the profile Ubuntu itself ships for its bwrap users) and asks again.
#
# It never turns the sandbox off: where it still cannot run, it prints a warning and exits 0,
# and regress then stops with exit 3 at the first unit that runs code (a code unit is an
# error, never a silent 0). Nothing else needs the sandbox.
#
# Environment: PYTHON (the interpreter regress is installed in; default python), and, for
# tests, REGRESS_USERNS_SYSCTL and REGRESS_APPARMOR_DIR.
set -uo pipefail
PYTHON="${PYTHON:-python}"
SYSCTL="${REGRESS_USERNS_SYSCTL:-/proc/sys/kernel/apparmor_restrict_unprivileged_userns}"
APPARMOR_DIR="${REGRESS_APPARMOR_DIR:-/etc/apparmor.d}"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo -n"

probe() {
  "$PYTHON" -c 'from regress.tasks.scoring.sandbox import SandboxLimits, require_sandbox
print(" ".join(require_sandbox(SandboxLimits())))' 2>&1
}

if ! command -v bwrap >/dev/null 2>&1; then
  echo "installing bubblewrap for the code sandbox"
  $SUDO apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
    || { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq bubblewrap >/dev/null; }
fi
if out=$(probe); then
  echo "code sandbox ready: bubblewrap $(bwrap --version | cut -d' ' -f2), layers: $out"
  exit 0
fi
if [ "$(cat "$SYSCTL" 2>/dev/null)" = 1 ]; then
  bwrap=$(command -v bwrap)
  echo "AppArmor restricts unprivileged user namespaces here: allowing them to $bwrap only"
  printf '%s\n' 'abi <abi/4.0>,' 'include <tunables/global>' \
    "profile regress-bwrap $bwrap flags=(unconfined) {" '  userns,' '}' \
    | $SUDO tee "$APPARMOR_DIR/regress-bwrap" >/dev/null \
    && $SUDO apparmor_parser -r "$APPARMOR_DIR/regress-bwrap"
  if out=$(probe); then
    echo "code sandbox ready: bubblewrap $(bwrap --version | cut -d' ' -f2), layers: $out"
    exit 0
  fi
fi
echo "::warning::the code sandbox cannot run on this runner; units that run model-written code will stop the check (exit 3): ${out##*$'\n'}"
exit 0
