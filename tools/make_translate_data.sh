#!/bin/sh
# Rebuilds data/translate/ (En-Fr pairs from the LibreOffice help pages) and its SHA256SUMS.
#   tools/make_translate_data.sh [EN_DEB FR_DEB]
# Without arguments the two Debian packages are fetched with `apt-get download` into a
# temporary directory. The result depends only on the two .deb files (versions pinned in
# data/README.md); a different package version gives different files and sums.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/data/translate"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
if [ $# -eq 2 ]; then
  en_deb=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  fr_deb=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
else
  (cd "$tmp" && apt-get download libreoffice-help-en-us libreoffice-help-fr)
  en_deb=$(ls "$tmp"/libreoffice-help-en-us_*.deb)
  fr_deb=$(ls "$tmp"/libreoffice-help-fr_*.deb)
fi
for d in "$en_deb" "$fr_deb"; do
  echo "package: $(dpkg-deb -f "$d" Package) $(dpkg-deb -f "$d" Version)  sha256 $(sha256sum "$d" | cut -d' ' -f1)"
done
dpkg-deb -x "$en_deb" "$tmp/en"
dpkg-deb -x "$fr_deb" "$tmp/fr"
python3 "$root/tools/make_translate_data.py" \
  "$tmp/en/usr/share/libreoffice/help/en-US" "$tmp/fr/usr/share/libreoffice/help/fr" "$out"
cd "$out"
sha256sum train.en train.fr valid.en valid.fr test.en test.fr > SHA256SUMS
wc -l train.en train.fr valid.en valid.fr test.en test.fr
