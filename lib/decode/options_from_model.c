/* A decoding's special tokens taken from the model that carries them. */
#include <stddef.h>

#include "core/error.h"
#include "tfm/decode.h"

tfm_status tfm_decode_options_from_model(const tfm_model *model, tfm_decode_options *options)
{
    const char *op = "tfm_decode_options_from_model";
    if (!model || !options)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, model ? "options" : "model");
    size_t needed = offsetof(tfm_decode_options, src_pad_id) + sizeof options->src_pad_id;
    if (options->struct_size < needed)
        return tfm__fail(TFM_ERR_ARG, "%s: options.struct_size %u is too small; call "
                         "tfm_decode_options_init first", op, (unsigned)options->struct_size);
    int32_t bos = tfm_model_bos_id(model), eos = tfm_model_eos_id(model),
            pad = tfm_model_pad_id(model);
    if (bos >= 0)
        options->bos_id = bos;
    if (eos >= 0)
        options->eos_id = eos;
    if (pad >= 0)
        options->src_pad_id = pad;
    return TFM_OK;
}
