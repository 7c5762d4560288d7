/**
 * The saga types this deployment runs, and the one place a request becomes a saga input: validated
 * against the type's schema, reduced to its intent key, hashed for the idempotency check.
 */
import { randomUUID } from 'node:crypto';
import { requestHash } from '../db';
import { intentKey, RmsValidationError } from '../rms';
import { ErrorType, IDEMPOTENCY_KEY_PATTERN, type SagaInput, type SagaTimings } from '../shared';
import { SagaInputError, type SagaDefinition } from './definition';
import { orderSaga } from './order';

export * from './definition';
export { orderSaga, DECLINED_CARD, REFUND_REFUSED_CARD, type OrderInput } from './order';

/** Largest accepted payload (its JSON), so a hostile request cannot bloat workflow history. */
export const MAX_PAYLOAD_BYTES = 64 * 1024;

/** Every saga type, by name. */
export const sagaTypes: Readonly<Record<string, SagaDefinition<unknown>>> = {
  [orderSaga.type]: orderSaga as unknown as SagaDefinition<unknown>,
};

/** The definition of `type`, or a SagaInputError naming the known ones. */
export function sagaDefinition(type: string): SagaDefinition<unknown> {
  const def = Object.hasOwn(sagaTypes, type) ? sagaTypes[type] : undefined;
  if (!def) {
    throw new SagaInputError(`unknown saga type ${JSON.stringify(type)} (known: ${Object.keys(sagaTypes).join(', ')})`, ErrorType.UNKNOWN_SAGA_TYPE);
  }
  return def;
}

/** Validates `data` against the type's schema; a SagaInputError says what is wrong and where. */
export function parseSagaData(def: SagaDefinition<unknown>, data: unknown): unknown {
  const size = Buffer.byteLength(JSON.stringify(data) ?? '', 'utf8');
  if (size > MAX_PAYLOAD_BYTES) {
    throw new SagaInputError(`payload is ${size} bytes; at most ${MAX_PAYLOAD_BYTES} are accepted`, ErrorType.INVALID_INPUT);
  }
  const parsed = def.schema.safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length ? issue.path.join('.') : '(root)';
    throw new SagaInputError(`invalid ${def.type} input at ${where}: ${issue.message}`, ErrorType.INVALID_INPUT);
  }
  return parsed.data;
}

/** Builds the workflow input of a request; throws SagaInputError before any side effect. */
export function prepareSaga(
  type: string,
  data: unknown,
  options: { idempotencyKey?: string; timings: SagaTimings },
): SagaInput {
  const def = sagaDefinition(type);
  const idempotencyKey = options.idempotencyKey ?? randomUUID();
  if (!IDEMPOTENCY_KEY_PATTERN.test(idempotencyKey)) {
    throw new SagaInputError(
      'idempotency key must be 1-128 characters of letters, digits and . _ : - (starting with a letter or digit)',
      ErrorType.INVALID_INPUT,
    );
  }
  const payload = parseSagaData(def, data);
  let key: string;
  try {
    key = intentKey(def.scope, def.intent(payload));
  } catch (err) {
    if (err instanceof RmsValidationError) throw new SagaInputError(`invalid ${type} intent: ${err.message}`, ErrorType.INVALID_INPUT);
    throw err;
  }
  return {
    type,
    idempotencyKey,
    requestHash: requestHash({ type, payload }),
    intentKey: key,
    payload,
    steps: def.steps.map((s) => ({ ...s })),
    compensation: { ...def.compensation },
    timings: options.timings,
  };
}
