#pragma once
// Relays a Job's events to an HTTP response on the handler's thread. A ResponseWriter turns
// events into bytes (SSE chunks, or one JSON document at the end); the relay writes them and
// notices a client that went away, which cancels the job at the worker's next step.
#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>

#include "frank/server/job.h"

namespace frank::server {

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  virtual std::string on_token(const TokenEvent& token) = 0;
  virtual std::string on_end(const JobEnd& end) = 0;
  // True once the response needs no more tokens (a stop sequence was seen).
  virtual bool satisfied() const = 0;
  // Bytes that keep the connection checked while nothing else is sent: an SSE comment for
  // streams, a space (insignificant leading whitespace in JSON) otherwise.
  virtual std::string heartbeat() const = 0;
};

// Installs a chunked content provider on `res` that relays `job` through `writer`.
void relay_job(httplib::Response& res, const char* content_type, std::shared_ptr<Job> job,
               std::shared_ptr<ResponseWriter> writer, std::chrono::milliseconds heartbeat_every);

}  // namespace frank::server
