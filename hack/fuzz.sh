#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME each (default 30s). A crash is written
# to the package's testdata/fuzz/<Target>/ and then runs as a regression test
# in every `go test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime="${FUZZTIME:-30s}"
for target in \
	pkg/clusterconfig:FuzzParsePath \
	pkg/clusterconfig:FuzzValidate \
	pkg/clusterconfig:FuzzSplitFile \
	pkg/clusterconfig:FuzzEdit \
	pkg/backup:FuzzRead; do
	pkg="${target%%:*}" name="${target##*:}"
	echo "==> ${name} (${pkg}, ${fuzztime})" >&2
	go test "./${pkg}" -run '^$' -fuzz "^${name}\$" -fuzztime "${fuzztime}"
done
