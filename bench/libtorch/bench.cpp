// The libtorch (PyTorch's C++ frontend) twin of bench/tfm-bench's training
// steps: what a C or C++ user would otherwise link. torch::nn::Transformer
// with the configs' sizes, masks and loss (bench/bench.c), Adam, timed as
// tfm-bench times a step. Prints one JSON line.
//   tfm-bench-libtorch --config 003|avg|002 --threads N --steps S --warmup W
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <sys/resource.h>

namespace {

struct Config {
    int64_t src_vocab, tgt_vocab, src_len, tgt_len, batch, d, heads, layers, d_ff;
    double dropout, lr, beta2, eps;
    bool learned, shared;
    int64_t pad;  // -1: none
};

const std::map<std::string, Config> configs = {
    {"003", {37, 30, 22, 84, 32, 64, 8, 2, 128, 0.1, 2e-4, 0.999, 1e-8, true, false, 0}},
    {"avg", {13, 13, 91, 9, 32, 256, 4, 3, 128, 0.1, 1e-3, 0.999, 1e-8, false, true, -1}},
    {"002", {5000, 5000, 100, 99, 64, 512, 8, 6, 2048, 0.1, 1e-4, 0.98, 1e-9, false, false, 0}},
};

struct Seq2SeqImpl : torch::nn::Module {
    Seq2SeqImpl(const Config &c)
        : transformer(torch::nn::TransformerOptions(c.d, c.heads)
                          .num_encoder_layers(c.layers)
                          .num_decoder_layers(c.layers)
                          .dim_feedforward(c.d_ff)
                          .dropout(c.dropout)),
          generator(c.d, c.tgt_vocab), dropout(c.dropout), scale(std::sqrt((double)c.d))
    {
        int64_t max_len = std::max(c.src_len, c.tgt_len + 1);
        src_embedding = register_module("src_embedding", torch::nn::Embedding(c.src_vocab, c.d));
        tgt_embedding = c.shared ? src_embedding
                                 : register_module("tgt_embedding",
                                                   torch::nn::Embedding(c.tgt_vocab, c.d));
        if (c.learned) {
            positions = register_module("positions", torch::nn::Embedding(max_len, c.d));
        } else {
            auto position = torch::arange(max_len, torch::kFloat).unsqueeze(1);
            auto rates = torch::exp(torch::arange(0, c.d, 2, torch::kFloat) *
                                    (-std::log(10000.0) / (double)c.d));
            table = torch::zeros({max_len, c.d});
            table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, c.d, 2)},
                             torch::sin(position * rates));
            table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, c.d, 2)},
                             torch::cos(position * rates));
            table = register_buffer("table", table);
        }
        register_module("transformer", transformer);
        register_module("generator", generator);
        register_module("dropout", dropout);
    }

    // [B, T] ids -> [T, B, D]: libtorch's Transformer is sequence-first
    torch::Tensor embed(torch::nn::Embedding &embedding, const torch::Tensor &ids)
    {
        int64_t n = ids.size(1);
        auto where = positions ? positions->forward(torch::arange(n))
                               : table.slice(0, 0, n);
        return dropout->forward(embedding->forward(ids) * scale + where).transpose(0, 1);
    }

    torch::Tensor forward(const torch::Tensor &src, const torch::Tensor &tgt,
                          const torch::Tensor &tgt_mask, const torch::Tensor &src_padding,
                          const torch::Tensor &tgt_padding)
    {
        auto y = transformer->forward(embed(src_embedding, src), embed(tgt_embedding, tgt),
                                      {}, tgt_mask, {}, src_padding, tgt_padding, src_padding);
        return generator->forward(y.transpose(0, 1));
    }

    torch::nn::Embedding src_embedding{nullptr}, tgt_embedding{nullptr}, positions{nullptr};
    torch::Tensor table;
    torch::nn::Transformer transformer;
    torch::nn::Linear generator;
    torch::nn::Dropout dropout;
    double scale;
};
TORCH_MODULE(Seq2Seq);

double now_ms()
{
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

int main(int argc, char **argv)
{
    std::string config = "003";
    int threads = 2, steps = 10, warmup = 3;
    for (int a = 1; a + 1 < argc; a += 2) {
        if (!std::strcmp(argv[a], "--config"))
            config = argv[a + 1];
        else if (!std::strcmp(argv[a], "--threads"))
            threads = std::atoi(argv[a + 1]);
        else if (!std::strcmp(argv[a], "--steps"))
            steps = std::atoi(argv[a + 1]);
        else if (!std::strcmp(argv[a], "--warmup"))
            warmup = std::atoi(argv[a + 1]);
        else if (!std::strcmp(argv[a], "--what") && std::strcmp(argv[a + 1], "train")) {
            std::fprintf(stderr, "tfm-bench-libtorch: training steps only\n");
            return 2;
        }
    }
    auto found = configs.find(config);
    if (found == configs.end() || threads < 1 || steps < 1 || warmup < 0) {
        std::fprintf(stderr, "usage: %s --config 003|avg|002 --threads N --steps S --warmup W\n",
                     argv[0]);
        return 2;
    }
    const Config &c = found->second;
    torch::set_num_threads(threads);
    torch::manual_seed(0);
    Seq2Seq model(c);
    model->train();
    torch::optim::Adam adam(model->parameters(),
                            torch::optim::AdamOptions(c.lr).betas({0.9, c.beta2}).eps(c.eps));
    auto src = torch::randint(1, c.src_vocab, {c.batch, c.src_len}, torch::kLong);
    auto tgt = torch::randint(1, c.tgt_vocab, {c.batch, c.tgt_len + 1}, torch::kLong);
    auto tgt_in = tgt.slice(1, 0, c.tgt_len), labels = tgt.slice(1, 1, c.tgt_len + 1);
    auto tgt_mask = torch::nn::TransformerImpl::generate_square_subsequent_mask(c.tgt_len);
    torch::Tensor src_padding, tgt_padding;
    if (c.pad >= 0) {
        src_padding = src.eq(c.pad);
        tgt_padding = tgt_in.eq(c.pad);
    }
    auto options = torch::nn::functional::CrossEntropyFuncOptions().ignore_index(
        c.pad >= 0 ? c.pad : -100);
    std::vector<double> times;
    for (int i = 0; i < warmup + steps; i++) {
        double start = now_ms();
        auto logits = model->forward(src, tgt_in, tgt_mask, src_padding, tgt_padding);
        auto loss = torch::nn::functional::cross_entropy(
            logits.reshape({-1, c.tgt_vocab}), labels.reshape({-1}), options);
        adam.zero_grad();
        loss.backward();
        adam.step();
        if (i >= warmup)
            times.push_back(now_ms() - start);
    }
    std::sort(times.begin(), times.end());
    double median = times.size() % 2 ? times[times.size() / 2]
                                     : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    std::printf("{\"impl\": \"libtorch\", \"config\": \"%s\", \"what\": \"train\", \"threads\": %d, "
                "\"steps\": %d, \"median_ms\": %.3f, \"min_ms\": %.3f, \"peak_rss_mb\": %.1f, "
                "\"torch\": \"%d.%d.%d\"}\n",
                config.c_str(), threads, steps, median, times.front(),
                (double)usage.ru_maxrss / 1024.0, TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
                TORCH_VERSION_PATCH);
    return 0;
}
