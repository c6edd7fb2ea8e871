"""franz-go (the Go client, with kadm) against kpybroker (`go test`; see helpers_test.go)."""
