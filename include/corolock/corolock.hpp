// The whole public surface of corolock.
#pragma once

#include <corolock/admin.hpp>
#include <corolock/backend.hpp>
#include <corolock/client.hpp>
#include <corolock/command.hpp>
#include <corolock/config.hpp>
#include <corolock/election.hpp>
#include <corolock/error.hpp>
#include <corolock/export.hpp>
#include <corolock/fair_mutex.hpp>
#include <corolock/fence.hpp>
#include <corolock/guard.hpp>
#include <corolock/lock_holder.hpp>
#include <corolock/lock_options.hpp>
#include <corolock/lock_type.hpp>
#include <corolock/locked_sql.hpp>
#include <corolock/metrics.hpp>
#include <corolock/multi_lock.hpp>
#include <corolock/mutex.hpp>
#include <corolock/printable.hpp>
#include <corolock/redlock.hpp>
#include <corolock/reply.hpp>
#include <corolock/semaphore.hpp>
#include <corolock/shared_mutex.hpp>
#include <corolock/url.hpp>
