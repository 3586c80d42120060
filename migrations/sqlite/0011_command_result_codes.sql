-- A remembered command result keeps its problem code, not an HTTP status: the edge renders statuses.
ALTER TABLE workspace_command_results ADD COLUMN code TEXT NOT NULL DEFAULT 'none';
UPDATE workspace_command_results SET code = CASE status
  WHEN 200 THEN 'none' WHEN 400 THEN 'bad_request' WHEN 403 THEN 'forbidden' WHEN 404 THEN 'not_found'
  WHEN 409 THEN 'conflict' WHEN 422 THEN 'validation_failed' ELSE 'internal' END;
ALTER TABLE workspace_command_results DROP COLUMN status;
