/**
 * Reading the project's Markdown as a test sees it: fenced code blocks, inline code, and the shell
 * commands in `sh` blocks split into words the way a POSIX shell would (quotes, escapes, line
 * continuations, leading `NAME=value` assignments, `#` comments).
 */

/** A fenced code block: its info string's first word and its text. */
export interface CodeBlock {
  lang: string;
  body: string;
}

/** Every fenced (```) code block of `markdown`, in order. */
export function codeBlocks(markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  const fence = /^```([^\n]*)\n([\s\S]*?)^```[ \t]*$/gm;
  for (let m = fence.exec(markdown); m; m = fence.exec(markdown)) {
    blocks.push({ lang: m[1]!.trim().split(/\s+/)[0] ?? '', body: m[2]! });
  }
  return blocks;
}

/** Every inline code span outside the fenced blocks. */
export function inlineCode(markdown: string): string[] {
  const prose = markdown.replace(/^```[^\n]*\n[\s\S]*?^```[ \t]*$/gm, '');
  return [...prose.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
}

/** One command of a shell block. */
export interface ShellCommand {
  /** The line as written (continuations joined). */
  line: string;
  /** Leading `NAME=value` assignments. */
  env: Record<string, string>;
  /** The words after them, quotes removed. */
  argv: string[];
}

/** The commands of a shell code block; throws on what a shell would not parse (an open quote). */
export function shellCommands(body: string): ShellCommand[] {
  const joined = body.replace(/\\\n/g, ' ');
  const commands: ShellCommand[] = [];
  for (const raw of joined.split('\n')) {
    const words = splitWords(raw);
    if (words.length === 0) continue;
    const env: Record<string, string> = {};
    while (words.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[0]!)) {
      const word = words.shift()!;
      const eq = word.indexOf('=');
      env[word.slice(0, eq)] = word.slice(eq + 1);
    }
    commands.push({ line: raw.trim(), env, argv: words });
  }
  return commands;
}

/** Splits one line into words; a `#` starting a word starts a comment. */
function splitWords(line: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let i = 0;
  const add = (s: string) => (word = (word ?? '') + s);
  while (i < line.length) {
    const c = line[i]!;
    if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unterminated ' in: ${line}`);
      add(line.slice(i + 1, end));
      i = end + 1;
    } else if (c === '"') {
      let j = i + 1;
      let s = '';
      while (j < line.length && line[j] !== '"') {
        if (line[j] === '\\' && j + 1 < line.length && '"\\$`'.includes(line[j + 1]!)) j++;
        s += line[j];
        j++;
      }
      if (j >= line.length) throw new Error(`unterminated " in: ${line}`);
      add(s);
      i = j + 1;
    } else if (c === '\\' && i + 1 < line.length) {
      add(line[i + 1]!);
      i += 2;
    } else if (c === ' ' || c === '\t') {
      if (word !== undefined) words.push(word);
      word = undefined;
      i++;
    } else if (c === '#' && word === undefined) {
      break;
    } else {
      add(c);
      i++;
    }
  }
  if (word !== undefined) words.push(word);
  return words;
}

/** A heading outside the fenced blocks: its level (the number of `#`) and its text. */
export interface Heading {
  level: number;
  text: string;
}

/** The lines of `markdown`, each with whether it lies inside a fenced (```) block, fences included. */
function linesWithFences(markdown: string): { line: string; fenced: boolean }[] {
  let inside = false;
  return markdown.split('\n').map((line) => {
    if (/^```/.test(line)) {
      inside = !inside;
      return { line, fenced: true };
    }
    return { line, fenced: inside };
  });
}

const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;

/** Every ATX heading (`## Text`) outside the fenced blocks, in order. */
export function headings(markdown: string): Heading[] {
  return linesWithFences(markdown)
    .filter(({ line, fenced }) => !fenced && HEADING.test(line))
    .map(({ line }) => {
      const [, hashes, text] = HEADING.exec(line)!;
      return { level: hashes!.length, text: text! };
    });
}

/**
 * `markdown` without the section that starts at the heading line `heading` (e.g. `## Use it in your
 * app`), up to the next heading of the same level or above; the text unchanged when there is none.
 */
export function withoutSection(markdown: string, heading: string): string {
  return sectionSplit(markdown, heading).rest;
}

/** The section that starts at the heading line `heading` (heading included), or undefined. */
export function section(markdown: string, heading: string): string | undefined {
  return sectionSplit(markdown, heading).section;
}

function sectionSplit(markdown: string, heading: string): { section?: string; rest: string } {
  const lines = linesWithFences(markdown);
  const start = lines.findIndex(({ line, fenced }) => !fenced && line === heading);
  if (start < 0) return { rest: markdown };
  const level = HEADING.exec(heading)?.[1]?.length ?? 6;
  let end = lines.findIndex(({ line, fenced }, i) => i > start && !fenced && (HEADING.exec(line)?.[1]?.length ?? 7) <= level);
  if (end < 0) end = lines.length;
  const text = lines.map(({ line }) => line);
  return { section: text.slice(start, end).join('\n'), rest: [...text.slice(0, start), ...text.slice(end)].join('\n') };
}

/**
 * The anchors GitHub gives the headings of `markdown` (`#the-production-shaped-stack-make-stack`):
 * the text without its Markdown, lower case, punctuation dropped, spaces as `-`; a repeated anchor
 * gets `-1`, `-2`, … as GitHub numbers them.
 */
export function headingAnchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const { text } of headings(markdown)) {
    const plain = text.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[`*_]{1,3}([^`*_]+)[`*_]{1,3}/g, '$1');
    const base = plain
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** The targets of the links and images (`[text](target)`, `![alt](target)`) outside code. */
export function linkTargets(markdown: string): string[] {
  const prose = linesWithFences(markdown)
    .filter(({ fenced }) => !fenced)
    .map(({ line }) => line.replace(/`[^`\n]*`/g, ''))
    .join('\n');
  return [...prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!);
}
