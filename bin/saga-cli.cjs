#!/usr/bin/env node
// The `saga` command of the installed package: the compiled CLI in dist/ (npm run build, run by
// prepack). In a development checkout, bin/saga runs the sources instead.
'use strict';
require('../dist/src/cli.js')
  .main(process.argv.slice(2))
  .then((code) => process.exit(code));
