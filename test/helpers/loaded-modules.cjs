// Preloaded (`node --require`) by the CLI tests: when the process exits, writes the files it loaded
// through Node's module loader (CommonJS, which the compiled CLI and its dependencies are) as a JSON
// array to $LOADED_MODULES_FILE, so a test can tell what a command loaded.
'use strict';
const { writeFileSync } = require('node:fs');

process.on('exit', () => {
  writeFileSync(process.env.LOADED_MODULES_FILE, JSON.stringify(Object.keys(require.cache)));
});
