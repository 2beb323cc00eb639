#!/usr/bin/env bash
# The reference systems of English -> Spanish translation on the Bible's held-out books (docs/data.md,
# "Bible"; RESULTS.md): Apertium's rule-based eng-spa and the word-for-word FreeDict dictionary
# baseline (`qkv data baseline mt-dict`), each scored with `qkv score` (BLEU and chrF as
# sacreBLEU 2.0.0, bootstrap 95% intervals) against the Spanish of the test and dev splits.
#
#   scripts/mt_baselines.sh [--data DIR] [--out DIR] [--qkv PATH] [--dict DIR] [--splits S]
#
#   --data DIR   the split files DIR/bible/bible.en-es.{test,dev}.tsv (default data:
#                `scripts/fetch_data.sh bible && qkv data prepare bible`)
#   --out DIR    where the hypotheses and the scores go (default runs/baselines):
#                bible.{split}.en (the English cut from the pairs), bible.{split}.es (the
#                reference), bible.{split}.apertium.es, bible.{split}.mt-dict.es, and
#                bible.{split}.{apertium,mt-dict}.score (qkv score's output)
#   --qkv PATH   the qkv binary (default build/release/qkv)
#   --dict DIR   the FreeDict dictionary (default data/cache/freedict)
#   --splits S   the splits, space-separated (default "test dev")
#
# Needs apertium with its eng-spa pair (scripts/setup.sh --apertium), perl, and the dictionary
# (scripts/fetch_data.sh freedict). Apertium translates each verse on its own, as
# `apertium -u eng-spa` does a file of one verse: the lines, escaped for Apertium's stream, are
# fed as separate blocks ("line\n\0") through the pipeline of the pair's mode in null-flush
# mode (-z), its part-of-speech tagger started once per block (it keeps its state across the
# NULs), and the output is split at the NULs. With `-f txt` (the default) or `-f line` the
# pipeline sees the file as one text: its transfer rules move words across line ends
# ("And the red\nhouse fell." -> "Y la casa\nroja cayó."), and `-f line` drops the period that
# ends a line (docs/data.md, "Reference systems for English -> Spanish"). -u (the generator's
# -n) leaves out the '*' of unknown words; Apertium's '#' (a word its generator could not
# inflect) and '@' (a word missing from the bilingual dictionary) marks are kept: the script
# counts them. Blanks are collapsed and each line trimmed (BLEU's 13a tokenizer and chrF ignore
# them). The script fails unless each hypothesis has exactly as many lines as the input.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
data=data out=runs/baselines qkv=build/release/qkv dict=data/cache/freedict splits="test dev"
while [ $# -gt 0 ]; do
    case "$1" in
    --data) data=$2; shift ;;
    --out) out=$2; shift ;;
    --qkv) qkv=$2; shift ;;
    --dict) dict=$2; shift ;;
    --splits) splits=$2; shift ;;
    -h | --help)
        awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
        exit 0
        ;;
    *)
        echo "mt_baselines: unknown argument '$1' (--help)" >&2
        exit 2
        ;;
    esac
    shift
done
cd "$root"

die() {
    echo "mt_baselines: $*" >&2
    exit 1
}

command -v apertium >/dev/null 2>&1 ||
    die "apertium is not installed (scripts/setup.sh --apertium installs apertium-eng-spa)"
apertium -l 2>/dev/null | grep -x '[[:space:]]*eng-spa' >/dev/null ||
    die "apertium has no eng-spa pair (scripts/setup.sh --apertium installs apertium-eng-spa)"
command -v perl >/dev/null 2>&1 || die "perl is needed to escape Apertium's stream"
[ -x "$qkv" ] || die "$qkv is not built (make build, or --qkv PATH)"
[ -f "$dict/eng-spa.index" ] && [ -f "$dict/eng-spa.dict" ] ||
    die "the FreeDict dictionary is missing in $dict: scripts/fetch_data.sh freedict"

version() {
    dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown
}

# The eng-spa pipeline of Apertium's mode file with every program in null-flush mode (-z),
# cut around its part-of-speech tagger: apertium-tagger keeps its state across the NULs that
# separate the blocks (a verse's tags, so its translation, then depend on the verses before
# it: "that" -> "aquel" or "que"), so it runs once per block; the other programs were checked
# to translate each block as a run of its own would (docs/data.md).
modes=${APERTIUM_MODES:-/usr/share/apertium/modes}
pipeline=$(apertium-wblank-mode -z "$modes/eng-spa.mode") ||
    die "cannot read Apertium's mode $modes/eng-spa.mode (APERTIUM_MODES names its directory)"
case "$pipeline" in
*"| apertium-tagger -z -g "*) ;;
*) die "Apertium's eng-spa mode has no 'apertium-tagger -z -g' step: $pipeline" ;;
esac
head_cmd=${pipeline%%| apertium-tagger -z -g *}
rest=${pipeline#*| apertium-tagger -z -g }
tagger_cmd="apertium-tagger -g ${rest%%|*}"
tagger_cmd=${tagger_cmd//\$2/} # the tagger's option of the mode: none
tail_cmd=${rest#*|}

# apertium_lines IN OUT: each line of IN translated on its own onto a line of OUT (apertium -u:
# $1 of the mode, the generator's option, is -n: no marks on unknown words; $2, the tagger's,
# is empty).
apertium_lines() {
    local tmp
    tmp=$(mktemp)
    # escape the stream's reserved characters, end each line with "\n\0" (a block of its own)
    perl -pe 's/([\[\]\\^\$\/@<>{}])/\\$1/g; s/\n?\z/\n\0/' "$1" |
        bash -c "$head_cmd" _ -n "" |
        perl -e '
            my ($cmd, $tmp) = @ARGV;
            local $/ = "\0";
            while (my $block = <STDIN>) {
                chomp $block;
                if (length $block) {
                    open(my $f, ">", $tmp) or die "mt_baselines: $tmp: $!\n";
                    print $f $block;
                    close $f;
                    my $tagged = `$cmd < "$tmp"`;
                    die "mt_baselines: $cmd failed\n" if $?;
                    print $tagged;
                }
                print "\0";
            }' "$tagger_cmd" "$tmp" |
        bash -c "$tail_cmd" _ -n "" |
        perl -0 -ne '
            next if $_ eq "\0" || $_ eq "";   # the extra flushes at the end of the stream
            chomp;                            # the NUL
            s/\n\z// or die "mt_baselines: a block of Apertium output without its line end: $_\n";
            s/\\(.)/$1/g;                     # unescape
            s/\s+/ /g; s/^ //; s/ $//;
            print "$_\n";' >"$2"
    rm -f "$tmp"
}

lines() {
    wc -l <"$1" | tr -d ' '
}

mkdir -p "$out"
{
    echo "apertium $(version apertium), apertium-eng-spa $(version apertium-eng-spa), lttoolbox $(version lttoolbox), apertium-lex-tools $(version apertium-lex-tools)"
    cat "$dict/versions.txt" 2>/dev/null || echo "dictionary: $dict"
} >"$out/versions.txt"
declare -A result
for split in $splits; do
    pairs=$data/bible/bible.en-es.$split.tsv
    [ -f "$pairs" ] || die "$pairs is missing: scripts/setup.sh --bible && scripts/fetch_data.sh bible && $qkv data prepare bible"
    en=$out/bible.$split.en ref=$out/bible.$split.es
    cut -f1 "$pairs" >"$en"
    cut -f2 "$pairs" >"$ref"
    n=$(lines "$en")
    echo "== $split: $n verses ($pairs)"
    apertium_lines "$en" "$out/bible.$split.apertium.es"
    "$qkv" data baseline mt-dict --dict "$dict" "$en" >"$out/bible.$split.mt-dict.es" 2>"$out/bible.$split.mt-dict.log" ||
        die "qkv data baseline mt-dict failed: $(cat "$out/bible.$split.mt-dict.log")"
    echo "   $(cat "$out/bible.$split.mt-dict.log")"
    hash_marks=$({ grep -o '#[^ ]*' "$out/bible.$split.apertium.es" || true; } | wc -l | tr -d ' ')
    at_marks=$({ grep -o '@[^ ]*' "$out/bible.$split.apertium.es" || true; } | wc -l | tr -d ' ')
    echo "   apertium: $hash_marks words marked '#' (not inflected), $at_marks marked '@' (not in the bilingual dictionary)"
    for sys in apertium mt-dict; do
        hyp=$out/bible.$split.$sys.es
        [ "$(lines "$hyp")" = "$n" ] || die "$hyp has $(lines "$hyp") lines, the input $n"
        "$qkv" score "$ref" -i "$hyp" --metrics bleu,chrf --confidence >"$out/bible.$split.$sys.score"
        result[$split.$sys]=$(cat "$out/bible.$split.$sys.score")
    done
done
echo
printf '%-8s %-10s %s\n' split system "score (qkv score --confidence: mean ± half-width of the 95% bootstrap interval)"
for split in $splits; do
    for sys in mt-dict apertium; do
        while IFS= read -r l; do
            printf '%-8s %-10s %s\n' "$split" "$sys" "$l"
        done <<<"${result[$split.$sys]}"
    done
done
echo
echo "versions: $(tr '\n' ';' <"$out/versions.txt")"
echo "hypotheses and scores in $out/"
