#!/usr/bin/env bash
# The pretraining text of the CPU evidence run: the King James Bible (1611, public domain)
# from the Debian packages bible-kjv and bible-kjv-text, WITHOUT Ruth, Esther and Jonah,
# which are held out (examples/kjv_ruth_esther_jonah.txt, printed the same way).
#
#   sudo apt-get install -y bible-kjv bible-kjv-text
#   bash train/prepare_kjv.sh [OUT_DIR]        # default runs/data/kjv -> OUT_DIR/kjv_train.txt
#
# Same layout as examples/: a book heading, chapter headings, one verse per line.
set -euo pipefail
out_dir="${1:-runs/data/kjv}"
command -v bible >/dev/null || { echo "bible(1) not found: apt-get install -y bible-kjv bible-kjv-text" >&2; exit 1; }
mkdir -p "$out_dir"
books=(Genesis Exodus Leviticus Numbers Deuteronomy Joshua Judges 1Samuel 2Samuel 1Kings 2Kings
  1Chronicles 2Chronicles Ezra Nehemiah Job Psalms Proverbs Ecclesiastes "Song of Solomon" Isaiah Jeremiah
  Lamentations Ezekiel Daniel Hosea Joel Amos Obadiah Micah Nahum Habakkuk Zephaniah Haggai Zechariah
  Malachi Matthew Mark Luke John Acts Romans 1Corinthians 2Corinthians Galatians Ephesians Philippians
  Colossians 1Thessalonians 2Thessalonians 1Timothy 2Timothy Titus Philemon Hebrews James 1Peter 2Peter
  1John 2John 3John Jude Revelation)
tmp="$(mktemp "$out_dir/.kjv_train.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
{
  printf 'The King James Version (1611), public domain, without Ruth, Esther and Jonah\n'
  for book in "${books[@]}"; do
    ref="${book// /}"; ref="${ref%ofSolomon}"
    printf '\n\nTHE BOOK OF %s\n' "$(echo "$book" | tr a-z A-Z)"
    bible -f "${ref}1:1-${ref}999:999" | sed -E 's/^[0-9]?[A-Za-z]+([0-9]+):([0-9]+) /\1 \2 /' \
      | awk '{ if ($1 != ch) { ch = $1; printf "\nChapter %s\n\n", ch } $1 = ""; $2 = ""; sub(/^  /, ""); print }'
  done
} > "$tmp"
mv "$tmp" "$out_dir/kjv_train.txt"
trap - EXIT
echo "wrote $out_dir/kjv_train.txt ($(wc -c < "$out_dir/kjv_train.txt") bytes)"
