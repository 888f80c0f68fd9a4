# Plugin author toolkit.

# Record every example plugin's event stream against the test control plane
# into plugins/examples/<name>/testdata/events.jsonl (checked in; replayed by
# host/replay's TestExampleRecordings in make test); the controller examples
# (TestRecordControllerExamples) with their stubs.json.
example-recordings: controlplane plugins
	INFORMER_HOST_WRITE_RECORDINGS=1 $(GO) test -count=1 -run 'TestRecord(Controller)?Examples$$' ./host

.PHONY: example-recordings
