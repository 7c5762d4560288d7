/**
 * `instanceof` that also knows an instance made by another copy of this package (an app's
 * node_modules may hold two, or the CLI and the app may load it from two paths): each class marks
 * its instances with a registry symbol and recognises the mark. A subclass is checked the usual way.
 */
export function branded<T extends abstract new (...args: never[]) => object>(cls: T, brand: symbol): void {
  Object.defineProperty(cls, Symbol.hasInstance, {
    value(this: unknown, x: unknown) {
      if (Function.prototype[Symbol.hasInstance].call(this, x)) return true;
      return this === cls && typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[brand] === true;
    },
  });
  Object.defineProperty(cls.prototype, brand, { value: true });
}

