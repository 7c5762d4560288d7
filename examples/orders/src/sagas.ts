/**
 * The order app's saga types, what its worker runs and its clients accept: `order` (creates an
 * order: charge the card at the payment provider, reserve stock), `order-cancel`, `order-return`
 * (which frees the cart to be ordered again) and `order-amend` (operations on an order). The saga CLI loads this module (package.json's `reservation-saga.sagas`)
 * and calls `sagas(config)`.
 */
import type { Config, SagaType } from 'reservation-saga';
import { orderSagaType, orderSagaWithSimulationsType } from './order';
import { orderAmendSagaType, orderAmendSagaWithSimulationsType, orderCancelSagaType, orderReturnSagaType } from './order-operations';
import { PaymentProviderClient } from './provider/client';
import { paymentProviderSettings } from './settings';

export * from './order';
export * from './order-operations';
export { ordersTable } from './orders-table';

/** What the order saga types are made with. */
export interface OrderSagaOptions {
  /** The payment provider the steps call. @default PAYMENT_PROVIDER_URL and PAYMENT_PROVIDER_TIMEOUT_MS of the environment */
  paymentProvider?: { url: string; timeoutMs: number };
  /**
   * With the test knobs (`simulate`: a long write, slow steps), for tests and the demo only: a knob
   * holds a connection, a transaction and its locks as long as a caller asks. @default false
   */
  simulations?: boolean;
}

/** The order app's saga types. */
export function orderSagas(options: OrderSagaOptions = {}): SagaType[] {
  const { url, timeoutMs } = options.paymentProvider ?? paymentProviderSettings(process.env);
  const payments = new PaymentProviderClient({ baseUrl: url, timeoutMs });
  return options.simulations
    ? [orderSagaWithSimulationsType(payments), orderCancelSagaType(payments), orderReturnSagaType(payments), orderAmendSagaWithSimulationsType(payments)]
    : [orderSagaType(payments), orderCancelSagaType(payments), orderReturnSagaType(payments), orderAmendSagaType(payments)];
}

/** The saga types under `config` (SAGA_SIMULATIONS turns the test knobs on): what the saga CLI and the worker load. */
export function sagas(config: Config): SagaType[] {
  return orderSagas({ simulations: config.simulations });
}
