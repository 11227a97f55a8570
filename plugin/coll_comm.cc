#include "plugin/coll_comm.h"

#include "common/log.h"

namespace tally::plugin {

Status CollComm::connect(const reducer::CollOptions& options, int dev, const void* const* handles,
                         int nranks, int rank, std::unique_ptr<CollComm>* out) {
  std::unique_ptr<reducer::CollClient> client;
  TALLY_RETURN_IF_ERROR(reducer::CollClient::connect(options, handles, nranks, rank, &client));
  TALLY_INFO(log::kInit | log::kColl, "CollNet dev %d: rank %d of %d joined %zu reducer(s)", dev,
             rank, nranks, options.reducers.size());
  *out = std::make_unique<CollComm>(dev, options.max_requests, std::move(client));
  return Status::ok();
}

CollComm::CollComm(int dev, int max_requests, std::unique_ptr<reducer::CollClient> client)
    : dev_(dev), client_(std::move(client)), requests_(static_cast<size_t>(max_requests)) {}

CollComm::~CollComm() {
  magic_ = 0;
  if (client_) client_->close();
}

Status CollComm::iallreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                            CollReq** out) {
  *out = nullptr;
  CollReq* slot = requests_.acquire();
  if (slot == nullptr) return Status::ok();
  Status st = client_->iallreduce(send, recv, count, type, op, &slot->request);
  if (!st || !slot->request) {
    requests_.release(slot);
    return st;
  }
  slot->magic = kCollRequestMagic;
  slot->owner = this;
  *out = slot;
  return Status::ok();
}

bool CollComm::ownsRequest(const CollReq* req) const {
  return requests_.owns(req) && req->magic == kCollRequestMagic && req->owner == this;
}

Status CollComm::test(CollReq* req, bool* done, size_t* bytes) {
  bool finished = false;
  size_t got = 0;
  TALLY_RETURN_IF_ERROR(req->request->test(&finished, &got));
  *done = finished;
  if (!finished) return Status::ok();
  if (bytes != nullptr) *bytes = got;
  requests_.release(req);
  return Status::ok();
}

}  // namespace tally::plugin
