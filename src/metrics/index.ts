/** Prometheus metrics of the gate, the leases and the sagas, and the endpoint that serves them. */
export * from './saga-metrics';
export * from './endpoint';
