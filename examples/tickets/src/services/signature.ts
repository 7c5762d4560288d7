/**
 * The signature of the payment service's webhooks, in the `Payment-Signature` header:
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed with the secret the app and the
 * service share. The timestamp is signed with the body, so a captured request cannot be replayed
 * past the tolerance, and the body is the raw bytes received: verify before parsing it (a body
 * parsed and serialized again may differ by a byte, and fails).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The `Payment-Signature` header value for `rawBody` sent at `timestampS` (unix seconds). */
export function signPayment(secret: string, rawBody: string, timestampS: number): string {
  return `t=${timestampS},v1=${hmac(secret, timestampS, rawBody)}`;
}

/**
 * Whether `header` is a valid signature of `rawBody` with `secret`, made within `toleranceS` of now
 * (either side, for clocks that differ a little). Several `v1=` entries are allowed (a sender
 * rotating its secret signs with both): one valid entry is enough. Never throws.
 */
export function verifyPaymentSignature(
  secret: string,
  header: string | undefined,
  rawBody: string,
  options: { toleranceS?: number; nowS?: number } = {},
): boolean {
  if (header === undefined || secret === '') return false;
  const entries = header.split(',').map((part) => part.trim().split('=', 2));
  const t = entries.find(([name]) => name === 't')?.[1];
  if (t === undefined || !/^\d{1,12}$/.test(t)) return false;
  const nowS = options.nowS ?? Math.floor(Date.now() / 1000);
  if (Math.abs(nowS - Number(t)) > (options.toleranceS ?? 300)) return false;
  const expected = Buffer.from(hmac(secret, Number(t), rawBody), 'hex');
  return entries.some(([name, value]) => {
    if (name !== 'v1' || value === undefined || !/^[0-9a-f]{64}$/i.test(value)) return false;
    return timingSafeEqual(Buffer.from(value, 'hex'), expected);
  });
}

function hmac(secret: string, timestampS: number, rawBody: string): string {
  return createHmac('sha256', secret).update(`${timestampS}.${rawBody}`).digest('hex');
}
