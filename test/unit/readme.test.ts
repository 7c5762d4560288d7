/**
 * Keeps the README and docs/ from rotting: every shell command they show is one that `make test` or
 * `.ci/run` runs (or a `bin/saga` example that the CLI's own parser accepts, with data the saga type
 * accepts, or a `temporal` example that the demo runs, with input the worker accepts), the
 * configuration and exit-code tables match the code, the demo's example table has the demo's
 * columns, the TypeScript examples compile, the images exist and every relative link (and its
 * anchor) leads somewhere. The README stays a front page (at most 300 lines); its reference lives in
 * docs/, so each check finds its table in whichever file holds it. docs/performance.md and its
 * archive of dated runs belong to the benchmarks and are left out, but for their images and links.
 * So is the README's "Use it in your app": it shows an app that installs the package (`npm install
 * reservation-saga`, `npx saga …`, imports of `reservation-saga`), which no command of this checkout
 * runs; the package's own tests check those entries (test/unit/public-entries.test.ts) and CI runs
 * the scaffold and the example apps against the packed tarball (scripts/test-package).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { buildProgram, EXIT } from '../../src/cli';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config';
import { planSaga, prepareSaga, SagaInputError } from '../../src/sagas';
import { DEMO_COLUMNS } from '../../scripts/demo/report';
import { temporalAnswerArgs, temporalResultArgs, temporalShowArgs, temporalStartArgs } from '../../scripts/demo/temporal-cli';
import { codeBlocks, headingAnchors, inlineCode, linkTargets, section, shellCommands, withoutSection, type ShellCommand } from '../helpers/markdown';
import { TEST_INTENT_SECRET } from '../helpers/secrets';
import { ORDER_VARIABLES, sagaTypesFor } from '../fixtures/orders';

const ROOT = path.resolve(__dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const readmeFull = read('README.md');
/** The README's section for apps that install the package: left out of the checks (see above). */
const APP_SECTION = '## Use it in your app';
const README = withoutSection(readmeFull, APP_SECTION);
/** The benchmarks' results (`make bench`): left out of the checks but for images and links. */
const PERFORMANCE = 'docs/performance.md';
/** The dated runs moved out of docs/performance.md, kept as written: left out the same way. */
const PERFORMANCE_ARCHIVE = 'docs/performance-archive.md';
/** Every Markdown file of the README and docs/, whole: what the image and link checks read. */
const MARKDOWN: Record<string, string> = {
  'README.md': readmeFull,
  ...Object.fromEntries(
    readdirSync(path.join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => [`docs/${f}`, read(`docs/${f}`)]),
  ),
};
/** What the other checks read. */
const DOCS: Record<string, string> = Object.fromEntries(
  Object.entries({ ...MARKDOWN, 'README.md': README }).filter(([file]) => file !== PERFORMANCE && file !== PERFORMANCE_ARCHIVE),
);

/** The one file of DOCS that holds `marker` (a heading or a table's caption), and its text. */
function docWith(marker: string | RegExp): { file: string; text: string } {
  const found = Object.entries(DOCS).filter(([, text]) => (typeof marker === 'string' ? text.includes(marker) : marker.test(text)));
  expect(found.map(([file]) => file), `the file holding ${String(marker)}`).toHaveLength(1);
  const [file, text] = found[0]!;
  return { file, text };
}

/**
 * The commands the docs may show besides `bin/saga`, each with what runs it. Adding a command to
 * the docs means adding it here, with a true reason.
 */
const EXERCISED: Record<string, string> = {
  'npx reservation-saga init my-app && cd my-app && npm test': 'scripts/test-package (make test-package, in .ci/run) runs it verbatim in a folder where only the packed tarball is installed',
  'make demo': '.ci/run runs `make demo ARGS=--once`: the same target and scenario, stopping at the end instead of at Ctrl-C',
  'make demo ARGS=--once': '.ci/run',
  'make test': '.ci/run',
  'make test-ui': '.ci/run',
  'bash .ci/run': 'CI',
  'make dev': 'make demo and make test-ui run scripts/dev-up, which is all that make dev runs',
  'make dev-down': 'make test-ui stops its dev server with scripts/dev-down, which is all that make dev-down runs',
  'make lint': 'make test runs the lint target',
  'make test-stack': '.ci/run',
  'make stack': '.ci/run runs make test-stack, which brings the stack up with scripts/stack-up, which is all that make stack runs',
  'make stack-down': 'make test-stack stops the stack it brought up with scripts/stack-down, which is all that make stack-down runs',
  'bash docs/examples/http-walkthrough.sh': 'test/integration/http-api.test.ts runs this script against saga serve and a worker',
  'npm run worker': 'test/integration/saga-worker-crash.test.ts starts src/worker.ts with tsx (test/helpers/processes.ts), which is what it runs',
  'node --import tsx examples/orders/src/provider/run.ts': 'make dev and make demo start the order example\'s payment provider with this command (scripts/dev-up)',
};

/**
 * Variables the dev scripts and the examples (docs/examples/http-walkthrough.sh) read besides the
 * config's, and the order example app's own (examples/orders/src/settings.ts).
 */
const DEV_VARIABLES = ['SAGA_API_URL', 'SAGA_API_TOKEN', 'TEMPORAL_DEV_PORT', 'TEMPORAL_DEV_UI_PORT', 'TEMPORAL_DEV_CODEC_PORT', 'TEMPORAL_DEV_PROVIDER_PORT', 'TEMPORAL_DEV_SERVE_PORT', 'TEMPORAL_DEV_DATA_DIR', 'TEMPORAL_CLI', 'ARGS', ...ORDER_VARIABLES];

/**
 * OpenTelemetry's standard variables the docs set in front of a command: the one that turns tracing on
 * (src/tracing/env.ts), read by the SDK itself; test/integration/tracing.test.ts runs a worker and
 * saga serve with it.
 */
const OTEL_VARIABLES = ['OTEL_EXPORTER_OTLP_ENDPOINT'];

const commands: { file: string; command: ShellCommand }[] = Object.entries(DOCS).flatMap(([file, text]) =>
  codeBlocks(text)
    .filter((b) => ['sh', 'bash', 'shell', 'console'].includes(b.lang))
    .flatMap((b) => shellCommands(b.body).map((command) => ({ file, command }))),
);
const sagaCommands = commands.filter(({ command }) => command.argv[0] === 'bin/saga');
const temporalCommands = commands.filter(({ command }) => command.argv[0] === 'temporal');
const otherCommands = commands.filter(({ command }) => !['bin/saga', 'temporal'].includes(command.argv[0]!));

/** Parses `args` with the CLI's program, every action replaced by a no-op; throws what commander throws. */
async function parseWithCli(args: string[]): Promise<void> {
  const program = buildProgram(() => loadConfig({}), () => undefined);
  const silent = { writeOut: () => undefined, writeErr: () => undefined };
  program.configureOutput(silent);
  for (const command of program.commands) command.configureOutput(silent).action(() => undefined);
  await program.parseAsync(args, { from: 'user' });
}

function optionValue(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
}

/** The rows of the first Markdown table after `heading`, as cells. */
function tableAfter(text: string, heading: string): string[][] {
  const start = text.indexOf(heading);
  expect(start, `heading ${heading}`).toBeGreaterThanOrEqual(0);
  const lines = text.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const rows: string[][] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(line.slice(1, -1).split(' | ').map((c) => c.trim()));
  }
  return rows;
}

describe('the README and docs/', () => {
  it('show shell commands at all (the extraction works)', () => {
    expect(commands.length).toBeGreaterThan(5);
    expect(sagaCommands.length).toBeGreaterThan(5);
  });

  it('show only commands that make test or .ci/run exercise', () => {
    const unknown = otherCommands.filter(({ command }) => !(command.argv.join(' ') in EXERCISED));
    expect(unknown.map(({ file, command }) => `${file}: ${command.line}`)).toEqual([]);
  });

  it('rest the EXERCISED reasons on what the Makefile and package.json really do', () => {
    const makefile = read('Makefile');
    const recipe = (target: string) => new RegExp(`^${target}:[^\\n]*\\n((?:\\t[^\\n]*\\n|#[^\\n]*\\n)*)`, 'm').exec(makefile)?.[1] ?? '';
    expect(recipe('dev')).toContain('scripts/dev-up');
    expect(recipe('dev-down')).toContain('scripts/dev-down');
    expect(recipe('demo')).toContain('scripts/demo.ts');
    expect(recipe('test-ui')).toContain('scripts/test-ui');
    expect(recipe('stack')).toContain('scripts/stack-up');
    expect(recipe('stack-down')).toContain('scripts/stack-down');
    expect(recipe('test-stack')).toContain('scripts/test-stack');
    expect(read('scripts/test-stack')).toContain('scripts/stack-up');
    expect(read('scripts/test-stack')).toContain('scripts/stack-down');
    expect(read('.ci/run')).toContain('make test-stack');
    expect(makefile).toMatch(/^test: [^\n]*\blint\b/m);
    expect(read('scripts/demo/stack.ts')).toContain("'dev-up'");
    expect(read('scripts/demo/stack.ts')).toContain("'dev-down'");
    expect(read('test/helpers/processes.ts')).toContain("'src/worker.ts'");
    expect(read('test/integration/saga-worker-crash.test.ts')).toContain('startWorkerProcess(');
    expect(read('scripts/dev-up')).toContain('node --import tsx examples/orders/src/provider/run.ts');
    expect((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.worker).toBe('tsx src/worker.ts');
  });

  it('set only known variables in front of commands, with values the config accepts', () => {
    for (const { file, command } of commands) {
      for (const name of Object.keys(command.env)) {
        expect([...CONFIG_VARIABLES, ...DEV_VARIABLES, ...OTEL_VARIABLES], `${file}: ${command.line}`).toContain(name);
      }
      expect(() => loadConfig(command.env), `${file}: ${command.line}`).not.toThrow();
    }
  });

  it('give bin/saga examples that the CLI parses, with data the saga type accepts (under the variables set in front)', async () => {
    for (const { file, command } of sagaCommands) {
      const args = command.argv.slice(1);
      await expect(parseWithCli(args), `${file}: ${command.line}`).resolves.toBeUndefined();
      const type = optionValue(args, '--type');
      const data = optionValue(args, '--data');
      if (data !== undefined) {
        // As the CLI would run it: a test knob (`simulate`) only with SAGA_SIMULATIONS=true in front.
        const config = loadConfig(command.env);
        const options = { idempotencyKey: optionValue(args, '--idempotency-key'), timings: { ...config.saga, compensationAttempts: 1 }, types: sagaTypesFor(config), intentSecret: TEST_INTENT_SECRET };
        // `@path` names a file of the repository (the CLI reads it from the working directory).
        const json = data.startsWith('@') ? read(data.slice(1)) : data;
        const prepared = (() => {
          try {
            prepareSaga(type!, JSON.parse(json), options);
            return 'accepted';
          } catch (err) {
            // An operation names an entity of the reader's own (an id its deployment handed out):
            // the data is accepted, and that entity is not found under the tests' secret.
            return err instanceof SagaInputError && err.code === 'ENTITY_NOT_FOUND' ? 'accepted' : String(err);
          }
        })();
        expect(prepared, `${file}: ${command.line}`).toBe('accepted');
      }
    }
  });

  it('give temporal examples that the demo runs, through the codec server, with input the worker accepts', () => {
    // The demo's sixth scene runs these arguments with the Temporal CLI (`make demo ARGS=--once` in .ci/run).
    const scenario = read('scripts/demo/scenario.ts');
    for (const helper of ['temporalStartArgs(', 'temporalAnswerArgs(', 'temporalResultArgs(', 'temporalShowArgs(']) expect(scenario).toContain(helper);
    const verb = (argv: readonly string[]) => argv.slice(1, 3).join(' ');
    const starts = temporalCommands.filter(({ command }) => verb(command.argv) === 'workflow start');
    const others = temporalCommands.filter(({ command }) => verb(command.argv) !== 'workflow start');
    expect(starts.length).toBeGreaterThan(0);
    expect(new Set(others.map(({ command }) => verb(command.argv)))).toEqual(new Set(['workflow update', 'workflow result', 'workflow show']));
    const config = loadConfig({});
    const started = new Set<string>();
    for (const { file, command } of starts) {
      const input = JSON.parse(optionValue(command.argv, '--input')!) as { type: string; idempotencyKey: string; data: unknown };
      expect(command.argv.slice(1), `${file}: ${command.line}`).toEqual(temporalStartArgs(config.temporal.taskQueue, input.type, input.idempotencyKey, input.data));
      const workflowId = optionValue(command.argv, '--workflow-id')!;
      const timings = { ...config.saga, compensationAttempts: 1 };
      const types = sagaTypesFor(config);
      expect(() => planSaga(input, { workflowId, namespace: config.temporal.namespace, timings, types, intentSecret: TEST_INTENT_SECRET }), `${file}: ${command.line}`).not.toThrow();
      started.add(workflowId);
    }
    const helpers: Record<string, (workflowId: string) => string[]> = { 'workflow update': temporalAnswerArgs, 'workflow result': temporalResultArgs, 'workflow show': temporalShowArgs };
    for (const { file, command } of others) {
      const workflowId = optionValue(command.argv, '--workflow-id')!;
      expect(command.argv.slice(1), `${file}: ${command.line}`).toEqual(helpers[verb(command.argv)]!(workflowId));
      expect(started, `${file}: ${command.line} reads a saga no example starts`).toContain(workflowId);
    }
  });

  it('show the demo\'s table with the columns the demo prints, every row as expected', () => {
    const table = Object.values(DOCS)
      .flatMap((text) => codeBlocks(text))
      .find((b) => b.lang === 'text' && b.body.startsWith('request '));
    expect(table, 'a text block starting with the demo table\'s header').toBeDefined();
    // The table, then a blank line, then the verdict and the gate's counts.
    const lines = table!.body.split('\n');
    const [header, rule] = lines;
    const body = lines.slice(2, lines.indexOf(''));
    expect(header!.trim().split(/\s{2,}/)).toEqual([...DEMO_COLUMNS]);
    const columns = rule!.split('  ').filter((c) => c.length > 0);
    expect(columns).toHaveLength(DEMO_COLUMNS.length);
    expect(body.length).toBeGreaterThan(5);
    const expectedColumn = DEMO_COLUMNS.indexOf('as expected');
    const start = columns.slice(0, expectedColumn).reduce((n, c) => n + c.length + 2, 0);
    for (const row of body) expect(row.slice(start, start + columns[expectedColumn]!.length).trim(), row).toBe('yes');
    const verdict = /^(\d+) of (\d+) requests/m.exec(table!.body);
    expect(verdict, 'the demo\'s verdict line').not.toBeNull();
    expect(verdict![1]).toBe(verdict![2]);
    expect(Number(verdict![2])).toBe(body.length);
    expect(table!.body).toMatch(/^The gate's answers \(SagaClient\.gateCounts\): /m);
  });

  it('name only make targets that exist', () => {
    const targets = new Set([...read('Makefile').matchAll(/^([a-z][a-z0-9-]*):/gm)].map((m) => m[1]!));
    const named = Object.values(DOCS).flatMap((text) => inlineCode(text)).filter((c) => c.startsWith('make '));
    expect(named.length).toBeGreaterThan(0);
    for (const code of named) expect(targets, code).toContain(code.split(' ')[1]);
  });

  it('document every CLI command, in the commands table and a section of docs/cli.md', () => {
    const names = buildProgram(() => loadConfig({}), () => undefined).commands.map((c) => c.name());
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) {
      expect(DOCS['docs/cli.md']).toContain(`| \`saga ${name}`);
      expect(DOCS['docs/cli.md']).toMatch(new RegExp(`^## ${name}$`, 'm'));
    }
  });

  it('give the CLI exit codes of EXIT', () => {
    const rows = tableAfter(docWith('Exit codes (`EXIT` in `src/cli.ts`)').text, 'Exit codes (`EXIT` in `src/cli.ts`)');
    const documented = Object.fromEntries(rows.map(([code, name]) => [name!.replace(/`/g, ''), Number(code)]));
    expect(documented).toEqual({ ...EXIT });
  });

  it('list every configuration variable with its real default', () => {
    const rows = tableAfter(docWith(/^# Configuration$/m).text, '# Configuration\n');
    const documented = rows.flatMap(([names]) => [...names!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!));
    expect([...documented].sort()).toEqual([...CONFIG_VARIABLES].sort());
    const defaults = loadConfig({});
    for (const [names, fallback] of rows) {
      const vars = [...names!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!);
      if (fallback === '–') continue;
      // Setting a variable to its documented default changes nothing, if the documentation is right.
      expect(vars).toHaveLength(1);
      expect(loadConfig({ [vars[0]!]: fallback!.replace(/`/g, '') }), vars[0]).toEqual(defaults);
    }
  });

  it('hold valid JSON in every json block', () => {
    for (const [file, text] of Object.entries(DOCS)) {
      for (const block of codeBlocks(text).filter((b) => b.lang === 'json')) {
        expect((): unknown => JSON.parse(block.body), `${file}: ${block.body.slice(0, 60)}`).not.toThrow();
      }
    }
  });

  it('give TypeScript examples that compile where their first line says they live', { timeout: 60_000 }, () => {
    const examples = Object.values(DOCS)
      .flatMap((text) => codeBlocks(text))
      .filter((b) => b.lang === 'ts');
    expect(examples.length).toBeGreaterThan(0);
    const virtual = new Map<string, string>();
    for (const example of examples) {
      const where = /^\/\/ ([\w./-]+\.ts)\b/.exec(example.body)?.[1];
      expect(where, `first line of: ${example.body.slice(0, 60)}`).toBeDefined();
      virtual.set(path.join(ROOT, where!), example.body);
    }
    const tsconfig = ts.readConfigFile(path.join(ROOT, 'tsconfig.json'), (f) => ts.sys.readFile(f));
    const options = { ...ts.parseJsonConfigFileContent(tsconfig.config, ts.sys, ROOT).options, noEmit: true };
    const host = ts.createCompilerHost(options);
    const fromDisk = host.getSourceFile.bind(host);
    host.getSourceFile = (file, language, ...rest) => {
      const text = virtual.get(path.resolve(file));
      return text === undefined ? fromDisk(file, language, ...rest) : ts.createSourceFile(file, text, language);
    };
    const fileExists = host.fileExists.bind(host);
    host.fileExists = (file) => virtual.has(path.resolve(file)) || fileExists(file);
    const program = ts.createProgram({ rootNames: [...virtual.keys()], options, host });
    // Only the examples' own diagnostics: the files they import are type-checked by `make typecheck`.
    const problems = [...virtual.keys()]
      .flatMap((file) => {
        const source = program.getSourceFile(file)!;
        return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
      })
      .map((d) => `${d.file ? path.relative(ROOT, d.file.fileName) : ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    expect(problems).toEqual([]);
  });

  it('show as the complete test of a saga the one `saga init` writes, line for line, in under 30 lines', () => {
    const testing = section(DOCS['docs/library.md']!, '## Testing your sagas');
    expect(testing, '## Testing your sagas').toBeDefined();
    const [example] = codeBlocks(testing!).filter((b) => b.lang === 'ts');
    const scaffold = read('templates/app/test/signup.test.ts');
    // The scaffold's test after its header comment; the docs' block after its line saying where it lives.
    const code = scaffold.slice(scaffold.indexOf('*/\n') + 3);
    expect(example!.body.split('\n')[0]).toMatch(/^\/\/ templates\/app\/test\/signup\.test\.ts: /);
    expect(example!.body.slice(example!.body.indexOf('\n') + 1)).toBe(code);
    expect(example!.body.trimEnd().split('\n').length).toBeLessThan(30);
  });

  it('show images that exist and stay small', () => {
    const images = Object.entries(MARKDOWN).flatMap(([file, text]) =>
      [...text.matchAll(/!\[[^\]]*\]\(([^)]+)\)/g)].map((m) => ({ file, image: path.join(path.dirname(file), m[1]!) })),
    );
    expect(images.filter(({ file }) => file === 'README.md').length).toBeGreaterThan(0);
    for (const { file, image } of images) expect(statSync(path.join(ROOT, image)).size, `${file}: ${image}`).toBeLessThan(300 * 1024);
  });

  it('link only to files that exist, and to headings they have', () => {
    const anchorsOf = (file: string) => headingAnchors(MARKDOWN[file] ?? read(file));
    const broken: string[] = [];
    for (const [file, text] of Object.entries(MARKDOWN)) {
      for (const target of linkTargets(text)) {
        if (/^[a-z]+:/i.test(target)) continue; // http(s), mailto: not ours to check
        const [where, anchor] = target.split('#') as [string, string | undefined];
        const linked = where === '' ? file : path.normalize(path.join(path.dirname(file), where));
        if (linked.startsWith('..') || !existsSync(path.join(ROOT, linked))) broken.push(`${file}: ${target} (no ${linked})`);
        else if (anchor !== undefined && linked.endsWith('.md') && !anchorsOf(linked).has(anchor)) broken.push(`${file}: ${target} (no heading #${anchor} in ${linked})`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('keep the README a front page: at most 300 lines, "Use it in your app" at most 70, the reference in docs/', () => {
    expect(readmeFull.trimEnd().split('\n').length).toBeLessThanOrEqual(300);
    const app = section(readmeFull, APP_SECTION);
    expect(app, APP_SECTION).toBeDefined();
    expect(app!.trimEnd().split('\n').length).toBeLessThanOrEqual(70);
    // Formatted as people write it: no line over 100 characters, in its code and its prose.
    expect(app!.split('\n').filter((line) => line.length > 100)).toEqual([]);
    expect(app).toContain('npm install reservation-saga');
    // Linked from the README, one line each; the benchmarks' current results in docs/performance.md,
    // the dated runs in its archive.
    for (const file of Object.keys(MARKDOWN).filter((f) => f.startsWith('docs/'))) expect(readmeFull, file).toContain(`](${file}`);
    expect(MARKDOWN[PERFORMANCE]).toMatch(/^# Performance\n[\s\S]*\n## Current results\n[\s\S]*\n## Methods\n[\s\S]*\n## Where the time goes\n/);
    expect(MARKDOWN[PERFORMANCE]).toContain('](performance-archive.md)');
    expect(readmeFull).not.toMatch(/^## Performance$/m);
  });
});
