-- Order events by the batch (issue 51's cost). A row of order_events
-- tells one change of the orders order_id, order_id + step, ...,
-- last_order_id, all alike: a commit round's new orders created with one
-- status are one row (a run), whatever SKUs and batches they belong to,
-- not a row each, and every other change is a run of one order. A run's
-- at is its first order's creation; each created event's time is its
-- order's created_at. One INSERT of a row or a few per batch
-- replaces an INSERT ... SELECT of a row per order, and the relay's mark
-- and prune touch as few rows. The relay, the audit and the tests expand
-- a run into one event per order (service.EventRun); the k-th order's
-- event id derives from the row's (service.RunEventID).
--
-- A run spans at most 65535 ids, so that the audit finds the runs that
-- may tell an order among the created rows of order_id at most that far
-- below it (order_events_created: one row a round, not a row an order).

-- +goose Up
ALTER TABLE order_events
    ADD COLUMN last_order_id BIGINT NOT NULL DEFAULT 0 AFTER order_id,
    ADD COLUMN step          INT    NOT NULL DEFAULT 1 AFTER last_order_id;
UPDATE order_events SET last_order_id = order_id;
ALTER TABLE order_events ADD CONSTRAINT order_events_run
    CHECK (step >= 1 AND last_order_id >= order_id AND last_order_id - order_id <= 65535 AND MOD(last_order_id - order_id, step) = 0);
CREATE INDEX order_events_created ON order_events (type, order_id);

-- +goose Down
-- A run of several orders becomes its first order's event: drain the
-- relay (no unpublished run) before going down.
DROP INDEX order_events_created ON order_events;
ALTER TABLE order_events DROP CONSTRAINT order_events_run;
ALTER TABLE order_events DROP COLUMN step, DROP COLUMN last_order_id;
