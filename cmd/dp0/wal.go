package main

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/dpsql/dpsql/internal/sqlite/hostsql"
)

// walConnector says, when the file is not in WAL mode, why dp0 needs it.
type walConnector struct{ *hostsql.Connector }

func (w walConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := w.Connector.Connect(ctx)
	if errors.Is(err, hostsql.ErrNotWAL) {
		return nil, fmt.Errorf("dp0 commits each charge through a connection of its own while your statement reads the file, which needs WAL mode: %w", err)
	}
	return c, err
}
