/** Sandbox-safe definitions shared by workflows, activities, worker and client. */
export * from './saga';
export * from './handlers';
export * from './search-attributes';
export * from './smoke';
export * from './saga-events';
