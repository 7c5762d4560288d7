/**
 * The Temporal UI, checked as a person sees it (`make test-ui`). Starts a dev server of its own (free
 * ports, a history file in a temporary directory) with a database and a Redis key prefix of its own,
 * runs the demo scenario against it (`scripts/demo.ts --once`), then opens the UI in headless Chromium
 * (Debian's, driven by playwright-core): the event history of completed and compensated sagas (the
 * local activities planSaga and reserveIntent first, then the activity tasks), their search
 * attributes, that requests rejected at the gate have no saga page, and the workflow list filtered by
 * `SagaOutcome` (no REJECTED sagas: the demo's rejections never start one). Prints `N passed, N failed`,
 * saves screenshots in test-results/ui/ and the stack's logs in test-results/ui/logs/ (with --update-docs also the two the README shows, in docs/),
 * and removes everything it created.
 *
 * Not part of `make test`: it needs a browser and takes about a minute.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Cluster } from 'ioredis';
import pg from 'pg';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { ENCRYPTED_ENCODING } from '../../src/codec/encryption-codec';
import { loadConfig } from '../../src/config';
import { createRedis } from '../../src/rms/connection';
import type { DemoRow } from '../../scripts/demo/scenario';
import { ROOT, devUp, freePort } from '../../scripts/demo/stack';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Without these, Chromium's own connections (sync, updates, QUIC) get refused here and it stalls. */
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const SHOTS = path.join(ROOT, 'test-results/ui');
const updateDocs = process.argv.includes('--update-docs');

const results: { name: string; error?: string }[] = [];

/** Runs one check; a failure is recorded with its message and the run goes on. */
async function check(name: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
    results.push({ name });
    console.log(`  ✓ ${name}`);
  } catch (err) {
    const error = err instanceof Error ? err.message : String(err);
    results.push({ name, error });
    console.log(`  ✗ ${name}\n      ${error.split('\n').join('\n      ')}`);
  }
}

function expectEqual<T>(actual: T, expected: T, what: string): void {
  if (JSON.stringify(actual) !== JSON.stringify(expected)) {
    throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

/** Runs `node --import tsx <script> ...args` with `env`; resolves with its exit code. */
function runNode(script: string, args: string[], env: NodeJS.ProcessEnv): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, script), ...args], { cwd: ROOT, env, stdio: 'inherit' });
    child.once('error', reject);
    child.once('exit', (code) => resolve(code));
  });
}

/**
 * Opens a saga's page (the UI redirects to its latest run's history) and waits for the whole history,
 * decoded: the UI shows the events at once and their payloads once the codec server has answered
 * (until then a payload reads as its encrypted JSON and a local activity has no "Activity Type", its
 * type being in the marker's payload). The first page after Chromium starts is the slowest to decode.
 */
async function openSaga(page: Page, url: string | undefined): Promise<void> {
  if (!url) throw new Error('the demo gave this saga no UI link');
  await page.goto(url);
  await page.getByText('Workflow Execution Completed').first().waitFor({ timeout: 30_000 });
  const rows = page.locator('[data-testid="event-summary-row"]');
  const undecoded = [
    rows.filter({ hasText: Buffer.from(ENCRYPTED_ENCODING).toString('base64') }),
    rows.filter({ hasText: 'Local Activity' }).filter({ hasNotText: 'Activity Type' }),
  ];
  for (const row of undecoded) await row.first().waitFor({ state: 'detached', timeout: 30_000 });
}

/**
 * The activities of the event history as the UI lists them, in event order: the "Activity Type" of
 * each "Activity Task Scheduled" row, and of each "Local Activity" row (a marker in the history),
 * the latter as `<type> (local)`.
 */
async function activityTrail(page: Page): Promise<string[]> {
  const locator = page.locator('[data-testid="event-summary-row"]');
  // The element type is the DOM's, which this project's tsconfig does not load; say what is used.
  const ids = await locator.evaluateAll((els: { getAttribute(name: string): string | null }[]) => els.map((e) => Number(e.getAttribute('data-eventid'))));
  const texts = await locator.allInnerTexts();
  return ids
    .map((id, i) => ({ id, text: texts[i] ?? '' }))
    .sort((a, b) => a.id - b.id)
    .map((r) => {
      const local = /Local Activity[\s\S]*?Activity Type\s+(\w+)/.exec(r.text)?.[1];
      return local ? `${local} (local)` : /Activity Task Scheduled[\s\S]*?Activity Type\s+(\w+)/.exec(r.text)?.[1];
    })
    .filter((name): name is string => name !== undefined);
}

/** What the page's "Search Attributes" tab shows, after clicking it (once it shows `awaited`). */
async function searchAttributesText(page: Page, awaited = '"SagaOutcome"'): Promise<string> {
  await page.getByRole('tab', { name: /^Search Attributes/ }).click();
  await page.waitForURL(/\/search-attributes$/);
  const panel = page.getByText(awaited).first();
  await panel.waitFor({ timeout: 15_000 });
  return (await page.locator('main').innerText()).replace(/\s+/g, ' ');
}

/** A screenshot of the page from its top to the end of the event history's timeline (above its table). */
async function shoot(page: Page, file: string): Promise<void> {
  await page.evaluate('window.scrollTo(0, 0)');
  const tableHeader = page.locator('th', { hasText: 'Event ID' }).first();
  const box = await tableHeader.boundingBox();
  // The view switch (All / Compact / JSON) sits just above the table's header.
  const height = Math.min(1600, Math.max(700, Math.round((box?.y ?? 1000) - 60)));
  // A viewport that tall, so the picture is what a person with a tall window sees.
  await page.setViewportSize({ width: 1280, height });
  await page.screenshot({ path: file });
  await page.setViewportSize({ width: 1280, height: 1000 });
}

/**
 * The workflow ids the UI's workflow list shows for a visibility query (reloaded until `expected`
 * shows or 10 attempts have passed: visibility lags behind the histories).
 */
async function listed(page: Page, uiBase: string, query: string, expected: readonly string[]): Promise<string[]> {
  const url = `${uiBase}/workflows?query=${encodeURIComponent(query)}`;
  let ids: string[] = [];
  for (let attempt = 0; attempt < 10; attempt++) {
    await page.goto(url);
    const rows = page.locator('[data-testid="workflows-summary-configurable-table-row"]');
    // Either rows, or the list's "No Results".
    await rows.first().or(page.getByText('No Results')).first().waitFor({ timeout: 15_000 }).catch(() => undefined);
    ids = (await rows.allInnerTexts()).map(
      // The demo's workflow ids, `<type>-demo-<run>-…`, whatever the saga type.
      (text) => /\b([a-z][a-z0-9-]*-demo-[A-Za-z0-9-]+)/.exec(text)?.[1] ?? text.trim(),
    );
    if (JSON.stringify([...ids].sort()) === JSON.stringify([...expected].sort())) break;
    await page.waitForTimeout(2000);
  }
  return ids.sort();
}

async function main(): Promise<number> {
  const started = Date.now();
  const run = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'rs-ui-'));
  const [grpcPort, uiPort, codecPort, providerPort, servePort] = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()];
  const baseDb = new URL(loadConfig().db.url);
  const db = new URL(baseDb);
  db.pathname = `/rs_ui_${run}`;
  const uiUrl = `http://127.0.0.1:${uiPort}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TEMPORAL_DEV_PORT: String(grpcPort),
    TEMPORAL_DEV_UI_PORT: String(uiPort),
    TEMPORAL_DEV_CODEC_PORT: String(codecPort),
    TEMPORAL_DEV_PROVIDER_PORT: String(providerPort),
    TEMPORAL_DEV_SERVE_PORT: String(servePort),
    PAYMENT_PROVIDER_URL: `http://127.0.0.1:${providerPort}`,
    TEMPORAL_DEV_DATA_DIR: dataDir,
    TEMPORAL_ADDRESS: `127.0.0.1:${grpcPort}`,
    TEMPORAL_UI_URL: uiUrl,
    TEMPORAL_NAMESPACE: 'default',
    DATABASE_URL: db.toString(),
    REDIS_KEY_PREFIX: `rsui:${run}:`,
  };
  const config = loadConfig(env);
  const uiBase = `${uiUrl}/namespaces/${config.temporal.namespace}`;

  // Undone in reverse order, whatever happens.
  const cleanups: { what: string; run: () => Promise<void> }[] = [
    {
      what: 'keep the logs and remove the temporary directory',
      run: async () => {
        // The stack's logs (dev server, codec server, provider, saga serve, worker) outlive the run, next to the screenshots.
        mkdirSync(path.join(SHOTS, 'logs'), { recursive: true });
        for (const log of readdirSync(dataDir).filter((f) => f.endsWith('.log'))) copyFileSync(path.join(dataDir, log), path.join(SHOTS, 'logs', log));
        rmSync(dataDir, { recursive: true, force: true });
      },
    },
    { what: 'drop the database', run: () => dropDatabase(baseDb, db.pathname.slice(1)) },
    { what: 'delete the Redis keys', run: () => deleteKeys(config, `${config.redis.keyPrefix}*`) },
  ];
  const cleanUp = async () => {
    for (const c of cleanups.splice(0).reverse()) {
      await c.run().catch((err: unknown) => console.error(`test-ui: could not ${c.what}: ${(err as Error).message}`));
    }
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => void cleanUp().finally(() => process.exit(130)));
  }

  let context: BrowserContext | undefined;
  try {
    console.log(`test-ui: dev server on 127.0.0.1:${grpcPort} (UI ${uiUrl}), history in ${dataDir}, database ${db.pathname.slice(1)}`);
    const stack = await devUp(env);
    cleanups.push({ what: 'stop the dev server', run: () => stack.stop() });
    if (!stack.started) throw new Error(`port ${grpcPort} was already served: refusing to test someone else's server`);

    const summaryPath = path.join(dataDir, 'summary.json');
    const demoExit = await runNode('scripts/demo.ts', ['--once', '--summary-json', summaryPath], env);
    console.log('\ntest-ui: the Temporal UI in headless Chromium');
    await check('the demo scenario ran and every request was answered, and every saga ended (or waits), as expected (exit 0)', async () => expectEqual(demoExit, 0, 'exit code'));
    const rows = (JSON.parse(readFileSync(summaryPath, 'utf8')) as { rows: DemoRow[] }).rows;
    const byId = (id: string) => {
      const r = rows.find((x) => x.id === id);
      if (!r) throw new Error(`no ${id} saga in the demo summary`);
      return r;
    };

    context = await chromium.launchPersistentContext(path.join(dataDir, 'chromium-profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_FLAGS,
      viewport: { width: 1280, height: 1000 },
      timeout: 60_000,
    });
    cleanups.push({ what: 'close Chromium', run: () => context!.close() });
    const page = context.pages()[0] ?? (await context.newPage());
    mkdirSync(SHOTS, { recursive: true });

    // Local activities are markers in the history, not activity tasks; the UI lists them as "Local Activity".
    // The write registers the row; the last step, in our database, completes it (write-registers).
    const reserved = ['planSaga (local)', 'reserveIntent (local)', 'writeEntity'];
    const completedTrail = [...reserved, 'runStep', 'runStep'];
    // retry-1 was started through the gate, plain-client by the Temporal CLI (the saga reserved by itself).
    for (const id of ['retry-1', 'long-write', 'plain-client']) {
      const saga = byId(id);
      await check(`${saga.workflowId}: the event history shows ${completedTrail.join(', ')} in order, the steps named, input and result decoded by the codec server`, async () => {
        await openSaga(page, saga.url);
        expectEqual(await activityTrail(page), completedTrail, 'activities');
        const text = await page.locator('main').innerText();
        // The result and the input are encrypted in Temporal: the UI shows them through the codec server.
        if (!/"outcome":\s*"COMPLETED"/.test(text)) throw new Error('the Result panel does not show "outcome": "COMPLETED" (decoded by the codec server)');
        if (!/"customer":\s*"/.test(text)) throw new Error('the Input panel does not show the decoded "customer"');
        for (const summary of ['step chargePayment', 'step reserveStock']) {
          if (!text.includes(summary)) throw new Error(`the timeline does not name the step: no "${summary}"`);
        }
        if (id === 'retry-1') await shoot(page, path.join(SHOTS, 'completed.png'));
      });
    }

    const compensated = {
      'short-stock': [...reserved, 'runStep', 'runStep', 'runCompensation', 'runCompensation', 'undoEntity'],
      declined: [...reserved, 'runStep', 'runCompensation', 'undoEntity'],
    };
    for (const [id, trail] of Object.entries(compensated)) {
      const saga = byId(id);
      await check(`${saga.workflowId}: the event history shows ${trail.join(', ')} in order`, async () => {
        await openSaga(page, saga.url);
        expectEqual(await activityTrail(page), trail, 'activities');
        const failure = id === 'short-stock' ? 'not enough stock of rare-coin (OUT_OF_STOCK)' : 'the card was declined (PAYMENT_DECLINED)';
        await page.getByText(failure).first().waitFor({ timeout: 5_000 });
        if (id === 'short-stock') await shoot(page, path.join(SHOTS, 'compensated.png'));
      });
      await check(`${saga.workflowId}: its Search Attributes tab shows SagaOutcome COMPENSATED, SagaType order and its IntentKey`, async () => {
        const text = await searchAttributesText(page);
        for (const expected of ['"SagaOutcome": "COMPENSATED"', '"SagaType": "order"', `"IntentKey": "${saga.intentKey}"`]) {
          if (!text.includes(expected)) throw new Error(`missing ${expected} in: ${text.slice(0, 400)}`);
        }
      });
    }

    const expired = byId('expired');
    const expiredTrail = [...reserved, 'runStep', 'runCompensation', 'undoEntity'];
    await check(`${expired.workflowId}: past its deadline, the event history shows ${expiredTrail.join(', ')} in order, and its Search Attributes SagaOutcome EXPIRED`, async () => {
      await openSaga(page, expired.url);
      expectEqual(await activityTrail(page), expiredTrail, 'activities');
      const text = await searchAttributesText(page);
      if (!text.includes('"SagaOutcome": "EXPIRED"')) throw new Error(`missing "SagaOutcome": "EXPIRED" in: ${text.slice(0, 400)}`);
    });

    // A saga waiting for an operator runs on: its page shows the wait (a timer named for what it
    // waits for) and its phase, and the list finds it by that phase.
    const attention = byId('attention');
    const wait = 'needs attention: waiting for a redrive of refundPayment, undoEntity';
    await check(`${attention.workflowId}: waiting in NEEDS_ATTENTION, its history shows the timer "${wait}" and its Search Attributes SagaPhase NEEDS_ATTENTION`, async () => {
      if (!attention.url) throw new Error('the demo gave this saga no UI link');
      await page.goto(attention.url);
      await page.getByText(wait).first().waitFor({ timeout: 30_000 });
      const text = await searchAttributesText(page, '"SagaPhase"');
      if (!text.includes('"SagaPhase": "NEEDS_ATTENTION"')) throw new Error(`missing "SagaPhase": "NEEDS_ATTENTION" in: ${text.slice(0, 400)}`);
      if (text.includes('"SagaOutcome"')) throw new Error('a saga that waits has no outcome yet, but the page shows one');
    });
    await check(`the workflow list for SagaPhase="NEEDS_ATTENTION" shows exactly ${attention.workflowId}`, async () => {
      const ids = await listed(page, uiBase, 'SagaPhase="NEEDS_ATTENTION"', [attention.workflowId]);
      expectEqual(ids, [attention.workflowId], 'workflow ids listed');
    });

    const rejected = rows.filter((r) => !r.started);
    await check(`the ${rejected.length} requests rejected at the gate have no saga page (the UI answers 404 for their workflow ids)`, async () => {
      if (rejected.length === 0) throw new Error('the demo summary has no rejected request');
      for (const r of rejected) {
        if (r.url !== undefined) throw new Error(`${r.id}: the demo links it to ${r.url}`);
        await page.goto(`${uiBase}/workflows/${encodeURIComponent(r.workflowId)}`);
        await page
          .getByText('Error: 404')
          .first()
          .waitFor({ timeout: 15_000 })
          .catch(() => {
            throw new Error(`${r.workflowId}: the UI does not answer 404`);
          });
      }
    });

    // One saga per workflow id (the retry's three requests share one); rejected requests have none.
    const outcomes: Record<string, string[]> = {};
    for (const r of rows.filter((x) => x.started)) {
      const ids = (outcomes[r.outcome] ??= []);
      if (!ids.includes(r.workflowId)) ids.push(r.workflowId);
    }
    for (const outcome of ['COMPENSATED', 'COMPLETED', 'EXPIRED', 'REJECTED']) {
      // The gate answers DUPLICATE and CONFLICT itself: no saga of the demo ends REJECTED any more.
      const expected = outcome === 'REJECTED' ? [] : (outcomes[outcome] ?? []).sort();
      const query = `SagaOutcome="${outcome}"`;
      const what = expected.length === 0 ? `no saga (the demo's rejected requests were answered at the gate)` : `exactly the ${expected.length} ${outcome} sagas`;
      await check(`the workflow list for ${query} shows ${what}`, async () => {
        const ids = await listed(page, uiBase, query, expected);
        expectEqual(ids, expected, 'workflow ids listed');
        if (outcome === 'COMPENSATED') await page.screenshot({ path: path.join(SHOTS, 'list-compensated.png') });
      });
    }

    if (updateDocs) {
      copyFileSync(path.join(SHOTS, 'completed.png'), path.join(ROOT, 'docs/ui-completed.png'));
      copyFileSync(path.join(SHOTS, 'compensated.png'), path.join(ROOT, 'docs/ui-compensated.png'));
      console.log('test-ui: updated docs/ui-completed.png and docs/ui-compensated.png');
    }
  } catch (err) {
    // Whatever stopped the run (no dev server, no browser, no summary) counts as one failure.
    await check('the run itself', async () => {
      throw err;
    });
  } finally {
    await cleanUp();
  }
  return report(started);
}

function report(started: number): number {
  const failed = results.filter((r) => r.error !== undefined).length;
  console.log(`\ntest-ui: screenshots in ${path.relative(ROOT, SHOTS)}/; took ${Math.round((Date.now() - started) / 1000)} s`);
  console.log(`${results.length - failed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

async function dropDatabase(base: URL, name: string): Promise<void> {
  const admin = new URL(base);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

async function deleteKeys(config: ReturnType<typeof loadConfig>, pattern: string): Promise<void> {
  const client = createRedis(config.redis);
  try {
    const nodes = client instanceof Cluster ? (await client.ping(), client.nodes('master')) : [client];
    for (const node of nodes) {
      for await (const keys of node.scanStream({ match: pattern, count: 1000 })) {
        if ((keys as string[]).length > 0) await node.unlink(...(keys as string[]));
      }
    }
  } finally {
    client.disconnect();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`test-ui: ${err instanceof Error ? err.stack : String(err)}`);
    console.log('0 passed, 1 failed');
    process.exit(1);
  },
);
