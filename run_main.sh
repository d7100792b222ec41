#!/usr/bin/env bash
# The main job (README, "Train and generate"): create .venv if it is missing, install minispore
# with the plotting extra, train the tiny LLaMA on Tiny Shakespeare with the default preset
# (shakespeare-char; checkpoints, metrics.json and loss.png go to out/shakespeare-char), then
# generate text from the trained checkpoint. Extra arguments go to `minispore train`,
# e.g. `./run_main.sh --max-iters 200` for a quick look.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || { echo "minispore needs Python >= 3.10 (found: $("$PYTHON" --version 2>&1))" >&2; exit 1; }
    echo "== creating .venv with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv .venv
fi

echo "== installing minispore[plot] into .venv"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[plot]'

OUT=out/shakespeare-char
EXTRA=()
# A second run continues the first (a finished run just generates again) instead of failing on the
# existing run directory; `./run_main.sh --overwrite` trains afresh.
if [ -e "$OUT/metrics.json" ] || [ -e "$OUT/latest" ]; then
    case " $* " in
        *" --resume "*|*" --overwrite "*) ;;
        *) echo "== $OUT holds a run: resuming it (pass --overwrite to train afresh)"; EXTRA=(--resume) ;;
    esac
fi

echo "== training (preset shakespeare-char)"
.venv/bin/minispore train --preset shakespeare-char --out "$OUT" ${EXTRA[@]+"${EXTRA[@]}"} "$@"

echo "== generating"
.venv/bin/minispore generate --ckpt out/shakespeare-char --prompt "ROMEO:"
