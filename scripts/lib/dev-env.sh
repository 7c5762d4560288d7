# shellcheck shell=bash
# The development environment of a command that scripts/dev-up starts: the development secrets of
# $data/dev.env, under the environment's own. Source this file at the top of a script, before anything
# else reads dev.env, so it records the environment's own secrets; then run each command in a
# subshell that calls dev_env first: `( dev_env; exec some-command )`. Sourcing dev.env anywhere
# else would overwrite the environment's values in the script's shell for every later command.

# The environment's own secrets, as they were when the script started.
dev_env_given_keys="${SAGA_CODEC_KEYS:-}"
dev_env_given_secret="${INTENT_KEY_SECRET:-}"
dev_env_given_tokens="${SAGA_SERVE_TOKENS:-}"

# Exports dev.env's variables into the current shell, then puts back any secret the environment set.
dev_env() {
  set -a
  # shellcheck disable=SC1091
  . "$data/dev.env"
  set +a
  if [ -n "$dev_env_given_keys" ]; then SAGA_CODEC_KEYS="$dev_env_given_keys"; fi
  if [ -n "$dev_env_given_secret" ]; then INTENT_KEY_SECRET="$dev_env_given_secret"; fi
  if [ -n "$dev_env_given_tokens" ]; then SAGA_SERVE_TOKENS="$dev_env_given_tokens"; fi
  return 0
}
