package metrics

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"
)

// RedisHook returns a go-redis hook that counts failed commands, pipelines and dials in
// redis_errors_total by command name ("dial" for a failed connection, "pipeline" for a
// failed pipeline or transaction). redis.Nil (a missing key) is not counted. Add it with
// client.AddHook.
func (m *Metrics) RedisHook() redis.Hook { return redisHook{m: m} }

type redisHook struct{ m *Metrics }

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			h.m.redisErrors.WithLabelValues("dial").Inc()
		}
		return c, err
	}
}

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if failed(err) {
			h.m.redisErrors.WithLabelValues(boundedWord(cmd.Name())).Inc()
		}
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if failed(err) {
			h.m.redisErrors.WithLabelValues("pipeline").Inc()
		}
		return err
	}
}

// failed reports whether err is a real failure: not nil and not redis.Nil.
func failed(err error) bool { return err != nil && !errors.Is(err, redis.Nil) }
