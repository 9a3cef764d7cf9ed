// SPDX-License-Identifier: BSD-3-Clause
// consumer.cpp - the same as consumer.c from C++ (11 and later): the header
// must compile as C++ and link without name mangling.
#include "sluice.h"

#include <cstring>
#include <iostream>
#include <string>

namespace
{

extern "C" int64_t frozen_clock(void *ctx)
{
    return *static_cast<const int64_t *>(ctx);
}

class handle
{
  public:
    explicit handle(const sluice_options &opts)
    {
        char err[256] = "";
        if (sluice_open("mem://", &opts, &sl_, err, sizeof(err)) != SLUICE_OK)
            error_ = err;
    }
    ~handle()
    {
        sluice_close(sl_);
    }
    handle(const handle &) = delete;
    handle &operator=(const handle &) = delete;
    sluice *get() const
    {
        return sl_;
    }
    const std::string &error() const
    {
        return error_;
    }

  private:
    sluice *sl_ = nullptr;
    std::string error_;
};

} // namespace

int main(int argc, char **argv)
{
    const std::string how = argc > 1 ? argv[1] : "c++";
    const bool want[3] = {true, true, false};
    int64_t now = 1700000000000;
    sluice_options opts;
    sluice_ruleset rules;
    sluice_result r{};
    char err[256] = "";

    if (std::string(sluice_version()) != SLUICE_VERSION ||
        sluice_version_number() != SLUICE_VERSION_NUMBER) {
        std::cerr << how << ": library " << sluice_version()
                  << " is not header " << SLUICE_VERSION << "\n";
        return 1;
    }
    sluice_options_init(&opts);
    opts.clock = frozen_clock; // one instant: no window ends mid-test
    opts.clock_ctx = &now;
    if (sluice_ruleset_parse("fixed:2/1s", &rules, err, sizeof(err)) !=
        SLUICE_OK) {
        std::cerr << how << ": " << err << "\n";
        return 1;
    }
    handle h(opts);
    if (h.get() == nullptr) {
        std::cerr << how << ": " << h.error() << "\n";
        return 1;
    }
    const std::string key = "user:1";
    std::cout << how << ": sluice " << sluice_version() << ":";
    for (int i = 0; i < 3; i++) {
        if (sluice_acquire(h.get(), key.data(), key.size(), &rules, 1, &r) !=
                SLUICE_OK ||
            r.allowed != want[i]) {
            std::cout << " request " << i + 1
                      << " wrong: " << sluice_errmsg(h.get()) << "\n";
            return 1;
        }
        std::cout << (r.allowed ? " allowed" : " denied");
    }
    // The denial as an HTTP answer, field by field, as a C++ server adds
    // them: a lambda without captures is the C callback.
    sluice_http_options ho;
    std::string fields;
    sluice_http_options_init(&ho);
    ho.name = "api";
    if (sluice_http_status(&r, &ho) != 429 ||
        sluice_http_each(
            &rules, &r, &ho,
            [](void *arg, const char *name, const char *value) {
                *static_cast<std::string *>(arg) +=
                    std::string(name) + "=" + value + ";";
                return 0;
            },
            &fields) != SLUICE_OK ||
        fields.find("Retry-After=1;") == std::string::npos) {
        std::cout << " the HTTP answer is wrong: " << fields << "\n";
        return 1;
    }
    std::cout << "\n";
    return 0;
}
