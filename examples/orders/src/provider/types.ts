/** The payment provider's wire format (JSON, snake_case), shared by its server and its client. */

/** Header that names the idempotency key of a `POST` (1–255 printable ASCII characters). */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

/** Header set to `true` on an answer replayed from the stored response of an earlier request. */
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

/** The test card whose every charge is declined (402 `card_declined`). */
export const DECLINED_TEST_CARD = '4000000000000002';

/** The test card whose charges succeed and whose refunds are refused (402 `refund_refused`). */
export const REFUND_REFUSED_TEST_CARD = '4000000000000259';

/** A charge as `GET /v1/charges` lists it. */
export interface ProviderCharge {
  /** `ch_…`. */
  id: string;
  /** A declined charge is kept too (it is the stored answer of its key). */
  status: 'succeeded' | 'declined';
  refunded: boolean;
  amount_cents: number;
  reference: string | null;
  /** The only digits of the card the provider keeps. */
  card_last4: string;
  /** ISO 8601. */
  created_at: string;
}

/** Body of `POST /v1/charges`. */
export interface ChargeRequestBody {
  amount_cents: number;
  /** 12–19 digits. */
  card: string;
  /** Up to 200 characters, e.g. the saga's key; `GET /v1/charges?reference=` finds the charges by it. */
  reference?: string | null;
}

/** 201 answer of `POST /v1/charges`. */
export interface ChargeResponseBody {
  id: string;
  object: 'charge';
  amount_cents: number;
  status: 'succeeded';
  reference: string | null;
  card_last4: string;
  refunded: false;
  created_at: string;
}

/** Body of `POST /v1/refunds`. */
export interface RefundRequestBody {
  /** The idempotency key the charge to refund was (or would be) made with. */
  charge_idempotency_key: string;
}

/** 200 answer of `POST /v1/refunds`. */
export interface RefundResponseBody {
  status: 'refunded' | 'voided' | 'nothing_to_refund';
  charge_id: string | null;
  amount_cents: number;
}

/** An RFC 9457 problem document, with the provider's `code` extension member. */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  /** On a 402 `card_declined`: the declined charge. */
  charge_id?: string;
}
