# Sourced by the scripts/ensure-* scripts that build a tool from its Go module into .tools/bin.
#
# go_install_as <package@version> <name go install gives it> <destination>
# `go install module@version` names a binary after its package directory (server, sql, promtool):
# each build goes to a folder of its own under .tools/, then is moved to its real name. Needs $root.
go_install_as() {
  local gobin
  gobin=$(mktemp -d "$root/.tools/build.XXXXXX")
  GOBIN="$gobin" GOFLAGS=-mod=mod go install "$1" >&2
  mv "$gobin/$2" "$3"
  rm -rf "$gobin"
}
