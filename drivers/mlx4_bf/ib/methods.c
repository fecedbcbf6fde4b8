// SPDX-License-Identifier: GPL-2.0
/*
 * The RDMA provider's driver-specific uverbs method: its description for
 * the uverbs ioctl core, which parses and checks the call's attributes and
 * calls the handler.
 *
 * This is C because the description is a tree of static const tables
 * built by the DECLARE_UVERBS_NAMED_METHOD() / ADD_UVERBS_METHODS() /
 * UAPI_DEF_CHAIN_OBJ_TREE() macros: compound literals and bit-fields that
 * Rust statics cannot express (bindgen's bit-field setters are not const
 * fn). The handler is the Rust one (ib/post.rs, through rdma/method.rs).
 */

#include <rdma/uverbs_ioctl.h>
#include <rdma/uverbs_std_types.h>

#include "../../../uapi/mlx4_bf.h"

#define UVERBS_MODULE_NAME mlx4_bf_ib
#include <rdma/uverbs_named_ioctl.h>

/*
 * In Rust (ib/post.rs, uverbs_method!): the handler, which reads the call
 * through attribute tokens declared there. Before the device is
 * registered, the Rust layer checks that the description below declares
 * each of them with the kind, sizes and presence the tokens have
 * (drivers/mlx4_bf/rdma/method/check.rs), and refuses the device if not.
 */
int UVERBS_HANDLER(MLX4_BF_IB_METHOD_QP_POST)(struct uverbs_attr_bundle *attrs);

DECLARE_UVERBS_NAMED_METHOD(MLX4_BF_IB_METHOD_QP_POST,
			    UVERBS_ATTR_PTR_IN(MLX4_BF_IB_ATTR_QP_POST_WQE,
					       UVERBS_ATTR_SIZE(16, MLX4_BF_QP_POST_MAX_WQE),
					       UA_MANDATORY),
			    UVERBS_ATTR_FLAGS_IN(MLX4_BF_IB_ATTR_QP_POST_FLAGS,
						 enum mlx4_bf_post_flags,
						 UA_OPTIONAL),
			    UVERBS_ATTR_PTR_OUT(MLX4_BF_IB_ATTR_QP_POST_RESULT,
						UVERBS_ATTR_TYPE(struct mlx4_bf_post_result),
						UA_OPTIONAL));

/*
 * On the device object, as mlx5's QUERY_PORT: no object handle to look up
 * and lock in the core; the QP is the context's own, by the number the
 * WQE carries, in the context's table (ib/post.rs).
 */
ADD_UVERBS_METHODS(mlx4_bf_device,
		   UVERBS_OBJECT_DEVICE,
		   &UVERBS_METHOD(MLX4_BF_IB_METHOD_QP_POST));

/* The provider's chain of definitions (struct ib_device's driver_def). */
const struct uapi_definition mlx4_bf_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DEVICE, &mlx4_bf_device),
	{},
};
