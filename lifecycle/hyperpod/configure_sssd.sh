#!/usr/bin/env bash
# Directory users and groups through SSSD (platform_parameters.json `directory`, from cluster.directory), on every
# node type, before create_users.sh:
#
#   packages   sssd with its LDAP provider must be on the node; when it is not, the packages listed in
#              directory.artifacts come from the operator's S3 mirror, checksum-verified (lib/artifacts.sh).
#   CA         $HYPERPOD_DIR/directory/ca.pem (shipped with these scripts) must match directory.ca_certificate.sha256,
#              then goes to $SSSD_CONF_DIR/hyperpod-directory-ca.pem; sssd demands a server certificate it signed.
#   sssd.conf  rendered by lib/sssd.py, mode 0600: ldaps:// (or StartTLS), ldap_tls_reqcert = demand, the directory's
#              own uidNumber/gidNumber (ldap_id_mapping = false) from 1001 up (min_id: no entry may take a system
#              account's or ubuntu's id, or the sudo group's gid), homes under the platform's home root (FSx when
#              mounted), cached credentials, no enumeration, and login only for directory.access_groups (simple
#              access provider). The bind password is read from Secrets Manager
#              on every run and travels only through a pipe into that file: never an argument, a log line or a
#              parameter file.
#   NSS / PAM  `sss` for passwd, group and shadow in $NSSWITCH; pam_sss and pam_mkhomedir through pam-auth-update.
#   sudo       %group rules for directory.admin_groups in $SUDOERS_DIR/91-hyperpod-directory (visudo-checked; not
#              90-hyperpod-*, which create_users.sh owns).
#   sssd       restarted when a file changed; then the first access group must resolve, or the node stops here
#              (a node nobody can log in to is better caught at creation).
#
# AWS's reference (awslabs/awsome-distributed-training@0edaf152, 1.architectures/5.sagemaker-hyperpod/
# LifecycleScripts/base-config/setup_sssd.py) installs sssd from the internet at node start, keeps an obfuscated
# bind password in the lifecycle bucket and maps AD SIDs to ids (ldap_id_mapping = True); here packages come from
# the mirror, the password from Secrets Manager, and ids from the directory, so they can equal the config's uids.
# Idempotent: a second run changes no file and restarts nothing.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/artifacts.sh
source "$HERE/lib/artifacts.sh"

SSSD_CONF_DIR="${SSSD_CONF_DIR:-/etc/sssd}"
SSSD_COMMAND="${SSSD_COMMAND:-/usr/sbin/sssd}"
NSSWITCH="${NSSWITCH:-/etc/nsswitch.conf}"
SSSD_LDAP_PROVIDERS="${SSSD_LDAP_PROVIDERS:-/usr/lib/x86_64-linux-gnu/sssd/libsss_ldap.so \
/usr/lib/aarch64-linux-gnu/sssd/libsss_ldap.so /usr/lib64/sssd/libsss_ldap.so}"
DIRECTORY_WAIT_ATTEMPTS="${DIRECTORY_WAIT_ATTEMPTS:-30}"
SUDOERS_FILE="$SUDOERS_DIR/91-hyperpod-directory"
CA_DEST="$SSSD_CONF_DIR/hyperpod-directory-ca.pem"

params directory.search_base directory.start_tls directory.ca_certificate.file directory.ca_certificate.sha256 \
  directory.bind_password_secret_arn directory.region fsx.mount_path
if [[ -z "$(param directory.search_base)" ]]; then
  # Turned off on a running node (the users sync): the admin groups' sudo goes with it.
  if [[ -e "$SUDOERS_FILE" ]]; then
    rm -f "$SUDOERS_FILE"
    log "removed $SUDOERS_FILE: the directory integration is off"
  fi
  log "directory integration is off: nothing to change"
  exit 0
fi

# --- refuse what the config layer refuses too, in case the parameters were edited by hand
start_tls="$(param directory.start_tls)"
while read -r uri; do
  [[ "$uri" == ldaps://* || ("$uri" == ldap://* && "$start_tls" == true) ]] ||
    die "directory.uris: refusing '$uri': only ldaps:// URIs, or ldap:// with start_tls, keep the passwords encrypted"
done < <(params_py list "$PARAMS_FILE" directory.uris)

# --- packages
has_sssd() {
  local provider
  [[ -x "$SSSD_COMMAND" ]] || return 1
  for provider in $SSSD_LDAP_PROVIDERS; do [[ -f "$provider" ]] && return 0; done
  return 1
}
if ! has_sssd; then
  install_artifacts directory
  has_sssd || die "sssd with its LDAP provider is not on this node (looked for $SSSD_COMMAND and" \
    "$SSSD_LDAP_PROVIDERS). Mirror the Debian packages sssd-common, sssd-ldap, libnss-sss and libpam-sss built" \
    "for the node's Ubuntu release to S3 and list them in cluster.directory.artifacts, or use an AMI that has them"
fi

changed=()
# put FILE MODE < content : replaces FILE only when the content differs; records it as changed.
put() {
  local file=$1 mode=$2 tmp PARENT
  parent_dir "$file"
  tmp="$(mktemp "$PARENT/.hyperpod.XXXXXX")"
  cat >"$tmp"
  if [[ -f "$file" ]] && cmp -s "$tmp" "$file"; then
    rm -f "$tmp"
    chmod "$mode" "$file"
    return 0
  fi
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$file"
  changed+=("$file")
  log "wrote $file"
}

# --- the CA, checked against the digest the stack computed from the config's file
ca_src="$HYPERPOD_DIR/$(param directory.ca_certificate.file)"
ca_sha="$(param directory.ca_certificate.sha256)"
[[ -f "$ca_src" ]] || die "the directory CA certificate $ca_src is missing from the lifecycle scripts"
[[ "$(sha256sum "$ca_src" | cut -d' ' -f1)" == "$ca_sha" ]] ||
  die "the directory CA certificate $ca_src does not match its sha256 in the parameters ($ca_sha); nothing changed"
install -d -m 0711 "$SSSD_CONF_DIR"
put "$CA_DEST" 0644 <"$ca_src"

# --- sssd.conf, the bind password piped from Secrets Manager into the renderer
umask 077
render_conf() {
  aws secretsmanager get-secret-value --secret-id "$(param directory.bind_password_secret_arn)" \
    --region "$(param directory.region)" --query SecretString --output text |
    lib_py sssd.py conf "$PARAMS_FILE" "$(home_root)" "$CA_DEST" >"$1"
}
conf_tmp="$(mktemp "$SSSD_CONF_DIR/.sssd.conf.XXXXXX")"
if ! retry_backoff 5 render_conf "$conf_tmp"; then
  rm -f "$conf_tmp"
  die "could not read the bind password secret $(param directory.bind_password_secret_arn) or render sssd.conf"
fi
put "$SSSD_CONF_DIR/sssd.conf" 0600 <"$conf_tmp"
rm -f "$conf_tmp"
umask 022

# --- NSS, PAM, sudo
lib_py sssd.py nsswitch "$NSSWITCH" | put "$NSSWITCH" 0644
command -v pam-auth-update >/dev/null || die "pam-auth-update is not on this node (Debian/Ubuntu's libpam-runtime)"
PAM_DIR="${PAM_DIR:-/etc/pam.d}"
# pam_sss (auth, account: the access groups, session) and a home on first login for directory users. pam-auth-update
# rewrites the common-* files even when nothing changes, so it runs only when a module is missing.
if ! grep -qs pam_sss.so "$PAM_DIR/common-account" || ! grep -qs pam_mkhomedir.so "$PAM_DIR/common-session"; then
  DEBIAN_FRONTEND=noninteractive pam-auth-update --enable sss mkhomedir
  log "pam_sss and pam_mkhomedir enabled in $PAM_DIR/common-*"
fi
# pam-auth-update leaves hand-edited common-* files alone: then pam_sss is missing and directory logins would fail.
grep -qs pam_sss.so "$PAM_DIR/common-auth" ||
  die "$PAM_DIR/common-auth has no pam_sss after pam-auth-update (edited by hand?); add it or reset" \
    "the file with pam-auth-update --force"
sudoers="$(lib_py sssd.py sudoers "$PARAMS_FILE")"
if [[ -n "$sudoers" ]]; then
  check="$(mktemp)"
  printf '%s\n' "$sudoers" >"$check"
  if command -v visudo >/dev/null && ! visudo -cf "$check" >/dev/null; then
    rm -f "$check"
    die "the sudoers rules for directory.admin_groups do not validate"
  fi
  rm -f "$check"
  [[ -d "$SUDOERS_DIR" ]] || mkdir -p "$SUDOERS_DIR"
  printf '%s\n' "$sudoers" | put "$SUDOERS_FILE" 0440
elif [[ -e "$SUDOERS_FILE" ]]; then
  rm -f "$SUDOERS_FILE"
  log "removed $SUDOERS_FILE: no admin_groups"
fi

# --- sssd
if ((${#changed[@]})) || ! systemctl is-active --quiet sssd; then
  systemctl enable sssd >/dev/null 2>&1 || true
  systemctl restart sssd
  log "sssd restarted"
else
  log "no change: sssd keeps running"
fi
mapfile -t access_groups < <(params_py list "$PARAMS_FILE" directory.access_groups)
group="${access_groups[0]}"
wait_until "$DIRECTORY_WAIT_ATTEMPTS" "directory group '$group' through sssd" getent -s sss group "$group" ||
  die "sssd cannot resolve the access group '$group': check directory.uris, bind_dn, the bind password secret and" \
    "that the servers' certificates are signed by directory.ca_certificate (journalctl -u sssd, /var/log/sssd/)"
log "directory reachable: group '$group' is $(getent -s sss group "$group" | cut -d: -f1,3)"
