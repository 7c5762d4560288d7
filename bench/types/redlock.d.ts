/**
 * The part of node-redlock 5 (beta) the benchmark uses. The package ships `dist/index.d.ts` but its
 * `exports` map names no types, so TypeScript's `nodenext` resolution cannot find them.
 */
declare module 'redlock' {
  import type { Cluster, Redis } from 'ioredis';

  /** Retry and clock-drift settings. */
  export interface Settings {
    readonly driftFactor: number;
    readonly retryCount: number;
    readonly retryDelay: number;
    readonly retryJitter: number;
    readonly automaticExtensionThreshold: number;
  }

  /** Thrown when the quorum could not be reached within the retries (e.g. the resource is locked). */
  export class ExecutionError extends Error {}

  /** A held lock. */
  export class Lock {
    readonly resources: string[];
    readonly value: string;
    expiration: number;
    release(): Promise<unknown>;
  }

  /** A lock manager over one or more independent Redis servers. */
  export default class Redlock {
    constructor(clients: Iterable<Redis | Cluster>, settings?: Partial<Settings>);
    acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock>;
  }
}
