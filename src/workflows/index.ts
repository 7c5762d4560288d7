/** Every workflow the worker registers. */
export { smokeWorkflow } from './smoke';
