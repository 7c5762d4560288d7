-- Up Migration
-- Orders placed before owners were recorded (created_by '') get one: `app`, the default owner, for
-- which the example's CLI and library clients placed every order. reservation-saga no longer opens a
-- row without an owner to every owner (only a table that opts in with `legacy.ownerlessRows` does,
-- and `orders` does not), so without this no operation would find them. An order an HTTP client
-- placed before then becomes the app's too: give it to its client (`http:<client id>`) by hand
-- where that matters (docs/operations.md, "Owners of rows from earlier versions").
UPDATE orders SET created_by = 'app' WHERE created_by = '';
