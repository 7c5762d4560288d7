// The package.json that npm pack (and npm publish) puts in the tarball, without what only this
// checkout uses: "reservation-saga".sagas names the order example's saga types, which the tarball
// does not hold (an app names its own). `strip` (prepack) keeps the checkout's manifest, byte for
// byte, in .pack-manifest.json and writes package.json without the field; `restore` (postpack, and
// any later run of either after a pack that stopped between them) puts it back. npm packs the file
// as it is on disk when prepack has run.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const manifest = path.join(root, 'package.json');
const kept = path.join(root, '.pack-manifest.json');
/** Fields of package.json that only the checkout uses. */
const CHECKOUT_ONLY = ['reservation-saga'];

function restore() {
  if (existsSync(kept)) renameSync(kept, manifest);
}

const command = process.argv[2];
if (command === 'strip') {
  restore();
  const text = readFileSync(manifest, 'utf8');
  const published = JSON.parse(text);
  for (const field of CHECKOUT_ONLY) delete published[field];
  writeFileSync(kept, text);
  writeFileSync(manifest, `${JSON.stringify(published, null, 2)}\n`);
} else if (command === 'restore') {
  restore();
} else {
  process.stderr.write('usage: node scripts/pack-manifest.mjs strip|restore\n');
  process.exit(2);
}
