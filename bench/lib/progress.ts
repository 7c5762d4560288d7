/** The progress line on stderr: rewritten in place on a terminal, one line per step otherwise (CI logs). */
import { performance } from 'node:perf_hooks';

/** Reports what the run is doing, with the time elapsed since it started. */
export class Progress {
  readonly #start = performance.now();
  readonly #tty = process.stderr.isTTY === true;
  #open = false;

  /** Shows `text` as the current step. */
  update(text: string): void {
    const line = `[${((performance.now() - this.#start) / 1000).toFixed(0).padStart(4)} s] ${text}`;
    if (this.#tty) {
      process.stderr.write(`\r\x1b[K${line.slice(0, (process.stderr.columns || 120) - 1)}`);
      this.#open = true;
    } else {
      process.stderr.write(`${line}\n`);
    }
  }

  /** Writes a line that stays (a warning, a finished phase). */
  log(text: string): void {
    this.done();
    process.stderr.write(`${text}\n`);
  }

  /** Ends the in-place line, so later output starts on a fresh line. */
  done(): void {
    if (this.#open) process.stderr.write('\n');
    this.#open = false;
  }
}
