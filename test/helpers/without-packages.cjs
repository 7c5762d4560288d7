// Preloaded (`node --require`): the packages named in $WITHOUT_PACKAGES (comma-separated) cannot be
// found by this process, as in an app that did not install them: require() and require.resolve()
// of them (or of a file in them) throw MODULE_NOT_FOUND, import() ERR_MODULE_NOT_FOUND (a resolve
// hook, registered here). Everything else resolves as usual (a loader registered after this one,
// tsx's, still runs first and asks this one for what it does not resolve itself).
'use strict';
const Module = require('node:module');

const hidden = (process.env.WITHOUT_PACKAGES ?? '').split(',').filter(Boolean);
const isHidden = (request) => typeof request === 'string' && hidden.some((name) => request === name || request.startsWith(`${name}/`));
const because = '(hidden by test/helpers/without-packages.cjs)';

const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (isHidden(request)) throw Object.assign(new Error(`Cannot find module '${request}' ${because}`), { code: 'MODULE_NOT_FOUND' });
  return resolveFilename.call(this, request, ...rest);
};

// The ES module half: a module of its own (hooks run apart from this thread), given the names.
const hooks = `
  let hidden = [];
  export function initialize(names) { hidden = names; }
  export async function resolve(specifier, context, nextResolve) {
    if (hidden.some((name) => specifier === name || specifier.startsWith(name + '/'))) {
      throw Object.assign(new Error("Cannot find package '" + specifier + "' ${because}"), { code: 'ERR_MODULE_NOT_FOUND' });
    }
    return nextResolve(specifier, context);
  }`;
Module.register(`data:text/javascript,${encodeURIComponent(hooks)}`, { data: hidden });
