/**
 * Keeping a lease for the length of one piece of work, and not a moment longer: the one place that
 * extends a lease on a timer. `withLease` owns the timer and the AbortSignal it hands to the work,
 * and stops both however the work ends (in the spirit of redlock's `using`).
 */
import { ApplicationFailure, CancelledFailure, Context } from '@temporalio/activity';
import type { SagaMetrics } from '../metrics';
import type { Rms } from '../rms';
import { ErrorType } from '../shared';

/** Counts the extensions and the losses of the leases kept here. */
export type LeaseMetrics = Pick<SagaMetrics, 'leaseExtended' | 'leaseLost'>;

/** The lease kept: its holder, and how long each extension makes it last. */
export interface KeptLease {
  intent: string;
  sessionId: string;
  fencingToken: string;
  leaseMs: number;
}

function leaseLost(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: ErrorType.LEASE_LOST, message, nonRetryable: true });
}

/**
 * Runs `work` while holding `lease`: checks it is still ours first (an attempt after the lease ended
 * must not start), then extends it and heartbeats every `intervalMs`. `work` gets a signal that aborts
 * when the lease is lost, when Redis stays out of reach until the lease would have ended, or when the
 * activity is cancelled; it must stop then (and check the signal, and {@link confirmLease}, before
 * it commits). When `work` settles, in any way, the timer stops and no further extension is sent. A
 * failure of `work` after the signal aborted is reported as the abort's reason (LEASE_LOST or the
 * cancellation).
 */
export async function withLease<T>(
  rms: Rms,
  lease: KeptLease,
  intervalMs: number,
  work: (signal: AbortSignal) => Promise<T>,
  options: {
    /**
     * false: the work does not need the lease; it is extended while it holds, and its loss ends the
     * extensions, not the work (an entity operation's external step). @default true
     */
    mustHold?: boolean;
    /** Counts each extension and the first loss. @default none */
    metrics?: LeaseMetrics;
  } = {},
): Promise<T> {
  const { metrics } = options;
  const ctx = Context.current();
  const mustHold = options.mustHold ?? true;
  // Listening before the first await: a cancellation (a worker stopping) that comes while the first
  // extension is on its way is not missed, or work that ends only on the signal would never end.
  const abort = new AbortController();
  const onCancel = () => abort.abort(new CancelledFailure('activity cancelled'));
  if (ctx.cancellationSignal.aborted) onCancel();
  else ctx.cancellationSignal.addEventListener('abort', onCancel, { once: true });
  let stopped = false;
  let beat: NodeJS.Timeout | undefined;
  try {
    const first = await rms.extend(lease);
    if (first.status === 'LOST') {
      metrics?.leaseLost(lease.intent);
      if (mustHold) throw leaseLost('the reservation lease was lost before the work began');
    } else {
      metrics?.leaseExtended(lease.intent);
    }
    if (abort.signal.aborted) throw abort.signal.reason;
    let held = first.status === 'EXTENDED';
    let expiresAt = first.status === 'EXTENDED' ? first.expiresAt : 0;
    // The first beat one interval in, not now: each heartbeat is a write on the Temporal server,
    // and work that ends within an interval needs none (the heartbeat timeout runs from the start).
    beat = setInterval(() => {
      if (!held) {
        // Only work that need not hold the lease gets here: it heartbeats on, and nothing is extended.
        ctx.heartbeat({ expiresAt });
        return;
      }
      rms.extend(lease).then(
        (r) => {
          if (stopped) return;
          if (r.status === 'LOST') {
            // Counted once: the first loss ends the extensions (and, when the work must hold it, the work).
            if (held) metrics?.leaseLost(lease.intent);
            held = false;
            if (mustHold) abort.abort(leaseLost('the reservation lease was lost during the work'));
          } else {
            expiresAt = r.expiresAt;
            metrics?.leaseExtended(lease.intent);
          }
          ctx.heartbeat({ expiresAt });
        },
        () => {
          if (stopped) return;
          // Redis unreachable: the lease may still be ours until it would have expired.
          if (Date.now() >= expiresAt && mustHold) abort.abort(leaseLost('the lease could not be extended before it expired'));
          else ctx.heartbeat({ expiresAt });
        },
      );
    }, intervalMs);
    try {
      return await work(abort.signal);
    } catch (err) {
      throw abort.signal.aborted ? abort.signal.reason : err;
    }
  } finally {
    stopped = true;
    clearInterval(beat);
    ctx.cancellationSignal.removeEventListener('abort', onCancel);
  }
}

/** Asks Redis whether the lease is still ours (the last check before a commit); LEASE_LOST if not. */
export async function confirmLease(rms: Rms, lease: KeptLease, { metrics }: { metrics?: LeaseMetrics } = {}): Promise<void> {
  const last = await rms.extend(lease);
  if (last.status === 'LOST') {
    metrics?.leaseLost(lease.intent);
    throw leaseLost('the reservation lease was lost before commit');
  }
  metrics?.leaseExtended(lease.intent);
}
