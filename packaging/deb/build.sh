#!/bin/bash
# Builds curfew_<version>_<arch>.deb with dpkg-deb from the multi-call program curfew-multicall linked
# with the Swift standard library statically (`swift build -c release --static-swift-stdlib`, see the
# Makefile's `static` and `deb` targets). It is installed once, as /usr/bin/curfew, and /usr/sbin/curfewd
# is a link to it: the program's name chooses the command or the agent, so the Swift runtime,
# Foundation and ICU are on disk (and in the page cache) once, not twice.
#
#   packaging/deb/build.sh BINDIR OUTDIR      prints the path of the .deb
#
# The version is the binaries' own (`curfew --version`) with the Debian revision of the top entry of
# packaging/deb/changelog, which must name the same upstream version. Depends come from
# dpkg-shlibdeps (the shared libraries the binaries really link) plus what the maintainer scripts and
# the agent run: pam-auth-update, pam_exec, systemd's busctl, deb-systemd-helper (setpriv is in
# util-linux, which is essential).
set -euo pipefail

die() { echo "build.sh: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: build.sh BINDIR OUTDIR"
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BINDIR=$(cd "$1" && pwd)
mkdir -p "$2"
OUTDIR=$(cd "$2" && pwd)
for tool in dpkg-deb dpkg-shlibdeps strip gzip python3 man; do
    command -v "$tool" > /dev/null || die "$tool is missing (apt-get install dpkg-dev binutils python3 man-db)"
done
[ -x "$BINDIR/curfew-multicall" ] || die "no executable $BINDIR/curfew-multicall"

stage=$(mktemp -d "${TMPDIR:-/tmp}/curfew-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
# The program under both of its names, for the version, the man pages and the completions.
mkdir "$stage/bin"
ln -s "$BINDIR/curfew-multicall" "$stage/bin/curfew"
ln -s "$BINDIR/curfew-multicall" "$stage/bin/curfewd"
BINDIR=$stage/bin

upstream=$("$BINDIR/curfew" --version)
[[ "$upstream" =~ ^[0-9][0-9A-Za-z.+~]*$ ]] || die "curfew --version must print a version, got '$upstream'"
[ "$("$BINDIR/curfewd" --version)" = "$upstream" ] || die "curfew and curfewd report different versions"
top=$(head -n 1 "$HERE/changelog")
[[ "$top" =~ ^curfew\ \(([^\)]+)\) ]] || die "packaging/deb/changelog: first line is not an entry: $top"
version=${BASH_REMATCH[1]}
[ "${version%-*}" = "$upstream" ] ||
    die "packaging/deb/changelog's top entry is version ${version%-*}, the binaries are $upstream: add an entry"
arch=$(dpkg --print-architecture)
# Dates in the package (man pages, changelog) come from the changelog, so the same input gives the same .deb.
changelog_date=$(sed -n 's/^ -- .*>  //p' "$HERE/changelog" | head -n 1)
export SOURCE_DATE_EPOCH=$(date -d "$changelog_date" +%s)

root=$stage/root
umask 022

# The program, stripped as dh_strip does (lintian: unstripped-binary-or-object), and the agent's name
# for it.
install -D -m 755 "$BINDIR/curfew" "$root/usr/bin/curfew"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/curfew"
install -d "$root/usr/sbin"
ln -s ../bin/curfew "$root/usr/sbin/curfewd"
ln -s curfew "$root/usr/bin/curfew-indicator"

# The child's tray item, started in every graphical login (it exits at once for accounts Curfew does
# not manage), and its icons.
install -D -m 644 "$REPO/packaging/autostart/curfew-indicator.desktop" "$root/etc/xdg/autostart/curfew-indicator.desktop"
for face in plenty warning blocked; do
    install -D -m 644 "$REPO/packaging/icons/curfew-$face.svg" "$root/usr/share/icons/hicolor/scalable/apps/curfew-$face.svg"
done

install -D -m 644 "$REPO/packaging/systemd/curfewd.service" "$root/lib/systemd/system/curfewd.service"
install -D -m 644 "$REPO/packaging/tmpfiles/curfew.conf" "$root/usr/lib/tmpfiles.d/curfew.conf"
install -D -m 644 "$REPO/packaging/pam-configs/curfew" "$root/usr/share/pam-configs/curfew"
# The administrator's settings (the fail mode, read by the agent and by check-login): a conffile.
install -D -m 644 "$REPO/packaging/default/curfew" "$root/etc/default/curfew"

# The default policy and the app catalog (the CLI and the agent read /etc/curfew/apps, then
# /usr/share/curfew/apps).
install -D -m 644 "$REPO/policies/default.json" "$root/usr/share/curfew/policies/default.json"
mkdir -p "$root/usr/share/curfew/apps" "$root/usr/share/doc/curfew/examples"
install -m 644 "$REPO"/policies/apps/*.json "$root/usr/share/curfew/apps/"
install -m 644 "$REPO"/policies/examples/*.json "$root/usr/share/doc/curfew/examples/"
# The README and the pages for parents, children, administrators, and on security, the design and the
# architecture (docs/*.md but the benchmark and testing pages, which concern a checkout of the source;
# the README's links to docs/ hold in /usr/share/doc/curfew too), with their pictures; and the app
# catalog's format (the family's own entries go in /etc/curfew/apps).
install -m 644 "$REPO/README.md" "$root/usr/share/doc/curfew/README.md"
install -d "$root/usr/share/doc/curfew/docs"
for page in "$REPO"/docs/*.md; do
    case $(basename "$page") in performance.md | testing.md) continue ;; esac
    install -m 644 "$page" "$root/usr/share/doc/curfew/docs/"
done
if [ -d "$REPO/docs/images" ]; then
    install -d "$root/usr/share/doc/curfew/docs/images"
    install -m 644 "$REPO"/docs/images/*.png "$root/usr/share/doc/curfew/docs/images/"
fi
install -m 644 "$REPO/policies/apps/README.md" "$root/usr/share/doc/curfew/README.catalog.md"
install -d "$root/etc/curfew/apps"

# Man pages from the binaries' own help and the hand-written sections (curfew.1.in, curfewd.8.in).
day=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)
mkdir -p "$root/usr/share/man/man1" "$root/usr/share/man/man8"
python3 "$HERE/manpage.py" "$BINDIR/curfew" 1 "$day" "$upstream" "$HERE/curfew.1.in" > "$root/usr/share/man/man1/curfew.1"
python3 "$HERE/manpage.py" "$BINDIR/curfewd" 8 "$day" "$upstream" "$HERE/curfewd.8.in" > "$root/usr/share/man/man8/curfewd.8"
install -m 644 "$HERE/curfew-indicator.1" "$root/usr/share/man/man1/curfew-indicator.1"
# The pages read cleanly (lintian runs groff too, in `make deb`).
for page in "$root/usr/share/man/man1/curfew.1" "$root/usr/share/man/man8/curfewd.8" "$root/usr/share/man/man1/curfew-indicator.1"; do
    warnings=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 > /dev/null) ||
        die "man cannot format $page"
    [ -z "$warnings" ] || die "man --warnings on $page: $warnings"
done
gzip -9n "$root/usr/share/man/man1/curfew.1" "$root/usr/share/man/man8/curfewd.8" "$root/usr/share/man/man1/curfew-indicator.1"

# Completions, from ArgumentParser: managed users and catalog apps are asked of curfew when the shell
# completes; lockout actions, weekdays and durations are lists (Sources/CurfewCLI/Completions.swift).
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
    "$root/usr/share/fish/vendor_completions.d"
"$BINDIR/curfew" --generate-completion-script bash > "$root/usr/share/bash-completion/completions/curfew"
"$BINDIR/curfew" --generate-completion-script zsh > "$root/usr/share/zsh/vendor-completions/_curfew"
"$BINDIR/curfew" --generate-completion-script fish > "$root/usr/share/fish/vendor_completions.d/curfew.fish"
# A completion is sourced, not run: no #! line (lintian: bash-completion-with-hashbang).
sed -i '1{/^#!/d}' "$root/usr/share/bash-completion/completions/curfew"
for file in "$root/usr/share/bash-completion/completions/curfew" "$root/usr/share/zsh/vendor-completions/_curfew" \
    "$root/usr/share/fish/vendor_completions.d/curfew.fish"; do
    [ -s "$file" ] || die "curfew --generate-completion-script wrote nothing for $file"
    chmod 644 "$file"
done

install -m 644 "$HERE/copyright" "$root/usr/share/doc/curfew/copyright"
install -D -m 644 "$HERE/lintian-overrides" "$root/usr/share/lintian/overrides/curfew"
gzip -9nc "$HERE/changelog" > "$root/usr/share/doc/curfew/changelog.Debian.gz"
chmod 644 "$root/usr/share/doc/curfew/changelog.Debian.gz"

# Depends: dpkg-shlibdeps reads debian/control of a source tree; give it a minimal one.
mkdir -p "$stage/src/debian"
printf 'Source: curfew\n\nPackage: curfew\nArchitecture: any\n' > "$stage/src/debian/control"
shlibs=$(cd "$stage/src" && dpkg-shlibdeps -O "$root/usr/bin/curfew" 2> "$stage/shlibdeps.log") ||
    die "dpkg-shlibdeps failed: $(cat "$stage/shlibdeps.log")"
shlibs=${shlibs#shlibs:Depends=}
[ -n "$shlibs" ] || die "dpkg-shlibdeps found no shared library"
depends="$shlibs, libpam-runtime (>= 1.0.1-6), libpam-modules, systemd, init-system-helpers (>= 1.52)"
# Time zones are read from the system's tz database.
depends="$depends, tzdata"

install -d -m 755 "$root/DEBIAN"
# Files under /etc are the administrator's to edit (a changed one is kept on upgrade).
(cd "$root" && find etc -type f | sed 's|^|/|' | sort) > "$root/DEBIAN/conffiles"
chmod 644 "$root/DEBIAN/conffiles"
installed_size=$(du -sk --apparent-size --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" << EOF
Package: curfew
Version: $version
Architecture: $arch
Maintainer: $(sed -n 's/^ -- \(.*>\)  .*/\1/p' "$HERE/changelog" | head -n 1)
Installed-Size: $installed_size
Depends: $depends
Recommends: nftables, pinentry-gnome3 | pinentry-gtk2 | pinentry-qt
Section: admin
Priority: optional
Description: family screen-time rules for Linux: limits, bedtimes, app rules
 Curfew counts each managed user's screen and app time and enforces daily
 limits, bedtimes that may cross midnight and per-app rules: it warns the
 child on the desktop and the terminal, ends or locks sessions at zero, stops
 blocked apps within a second, and refuses logins at bedtime through PAM.
 .
 Policy is a signed record in a shared directory (local, or synced between
 the family's computers with Syncthing or NFS); every computer confirms what
 it applied. This package has the curfew command, the curfewd agent (a
 systemd service), the PAM login check and the app catalog.
EOF
install -m 755 "$HERE/postinst" "$HERE/prerm" "$HERE/postrm" "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
    > "$root/DEBIAN/md5sums"
chmod 644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums" "$root/DEBIAN/conffiles"
find "$root" -type d -exec chmod 755 {} +

deb="$OUTDIR/curfew_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" > /dev/null
echo "$deb"
