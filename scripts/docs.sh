#!/usr/bin/env bash
# Builds the documentation site into build/docs/html and checks it:
#  1. Doxygen reads the headers' /// comments into XML (docs/Doxyfile; Debian's doxygen), mended for
#     Doxygen 1.9.4's slips (docs/tools/doxygen_xml.py);
#  2. Sphinx (docs/requirements.txt, pinned, in a fresh virtual environment over the Python training
#     stacks, whose torch, Lightning and scvi-tools the API pages import, with chunksampler's wheel)
#     builds the MyST pages with -W --keep-going -n: any warning, a cross reference that resolves
#     to nothing included, fails;
#  3. docs/tools/check_site.py: every public Python and C++ name has an entry in the API reference,
#     every page's local links and resources exist, and headless Chromium renders the landing page,
#     a tutorial and an API page without a failed load (screenshots in build/docs/screenshots);
#  4. docs/tools/plots.py redraws the performance page's plots from the benchmarks' committed JSON
#     (docs/performance/*.json) into a temporary directory: each must equal its committed SVG in
#     docs/images, so that no plot drifts from its numbers.
# The runnable blocks of the pages are checked with the tests (scripts/check_readme.py under ctest,
# tests/python/test_readme.py), as the README's are. About a minute with the stacks made.
#   scripts/docs.sh            then open build/docs/html/index.html
# The wheel: from $CHUNKSAMPLER_WHEEL_DIR (scripts/test.sh builds it once), else built here.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/deps.sh
ensure_build_packages
ensure_packages "${docs_packages[@]}"

out="$root/build/docs"
rm -rf "$out/html" "$out/xml" "$out/screenshots" "$out/plots" "$out/env" "$root/docs/api/generated"
mkdir -p "$out"
SECONDS=0

stacks=$(ensure_stacks_env "$root")
thin_stacks_env "$stacks" "$out/env"
pip=("$out/env/bin/python" -m pip install --quiet --disable-pip-version-check --no-input)
"${pip[@]}" -r docs/requirements.txt
wheels="${CHUNKSAMPLER_WHEEL_DIR:-}"
if [ -z "$wheels" ]; then
  wheels="$out/wheels"
  build_wheel "$root" "$stacks" "$wheels" "$out/wheel-build"
fi
"${pip[@]}" --no-deps --force-reinstall "$wheels"/chunksampler-*-cp312-*.whl
echo "docs.sh: environment ready in ${SECONDS}s" >&2

(cd docs && CHUNKSAMPLER_DOXYGEN_OUT="$out" doxygen Doxyfile)
"$out/env/bin/python" docs/tools/doxygen_xml.py "$out/xml"

# From outside the tree, so that `import chunksampler` is the installed wheel.
(cd "$out" && CHUNKSAMPLER_DOXYGEN_XML="$out/xml" "$out/env/bin/python" -m sphinx -W --keep-going -n -q \
  -j "$(nproc)" -b html "$root/docs" "$out/html")
echo "docs.sh: site built in ${SECONDS}s" >&2

(cd "$out" && "$out/env/bin/python" "$root/docs/tools/check_site.py" "$out/html" --screenshots "$out/screenshots")

"$out/env/bin/python" docs/tools/plots.py --out "$out/plots" >/dev/null
for drawn in "$out"/plots/*.svg; do
  if ! cmp -s "$drawn" "docs/images/$(basename "$drawn")"; then
    echo "docs.sh: docs/images/$(basename "$drawn") differs from what docs/tools/plots.py draws from" \
      "docs/performance/*.json; run \`build/docs/env/bin/python docs/tools/plots.py\` and commit the SVGs" >&2
    exit 1
  fi
done
echo "docs.sh: build/docs/html checked in ${SECONDS}s; open build/docs/html/index.html" >&2
