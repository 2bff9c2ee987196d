//! Accounts (tenants): unique usernames, CHAP secrets generated when not given.

use serde_json::{Value, json};

use super::{Ctx, Fail, Params, R, fail, names};
use crate::sim::solidfire::state::Cluster;

pub(super) fn account_json(c: &Cluster, id: u64) -> Value {
    let a = &c.accounts[&id];
    let volumes: Vec<u64> = c
        .volumes
        .iter()
        .filter(|(_, v)| v.account_id == id)
        .map(|(vid, _)| *vid)
        .collect();
    json!({
        "accountID": id,
        "username": a.username,
        "status": "active",
        "volumes": volumes,
        "initiatorSecret": a.initiator_secret,
        "targetSecret": a.target_secret,
        "attributes": a.attributes,
        "storageContainerID": "00000000-0000-0000-0000-000000000000",
        "enableChap": true,
    })
}

/// The account's id, or xUnknownAccount.
pub(super) fn check_account(c: &Cluster, id: u64) -> Result<u64, Fail> {
    if c.accounts.contains_key(&id) {
        Ok(id)
    } else {
        Err(fail(
            names::UNKNOWN_ACCOUNT,
            format!("AccountID {id} does not exist."),
        ))
    }
}

pub(super) fn get_by_name(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let name = p.str("username")?;
    let id = ctx
        .c
        .accounts
        .iter()
        .find(|(_, a)| a.username == name)
        .map(|(id, _)| *id)
        .ok_or_else(|| fail(names::UNKNOWN_ACCOUNT, names::UNKNOWN_ACCOUNT))?;
    Ok(json!({ "account": account_json(ctx.c, id) }))
}

pub(super) fn get_by_id(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let id = check_account(ctx.c, p.id("accountID")?)?;
    Ok(json!({ "account": account_json(ctx.c, id) }))
}

fn secret(p: &Params<'_>, name: &str) -> Result<Option<String>, Fail> {
    let Some(s) = p.opt_str(name)? else {
        return Ok(None);
    };
    if !(12..=16).contains(&s.len()) || !s.chars().all(|c| c.is_ascii_graphic()) {
        return Err(fail(
            names::INVALID_PARAMETER,
            format!(
                "Invalid value for parameter {name}: a CHAP secret is 12 to 16 printable characters"
            ),
        ));
    }
    Ok(Some(s.to_string()))
}

pub(super) fn add(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let username = p.str("username")?;
    if username.is_empty() || username.len() > 64 {
        return Err(fail(
            names::INVALID_PARAMETER,
            "Invalid value for parameter username: 1 to 64 characters",
        ));
    }
    let initiator = secret(p, "initiatorSecret")?;
    let target = secret(p, "targetSecret")?;
    let attributes = p.attributes()?;
    p.opt_bool("enableChap")?;
    if ctx.c.accounts.values().any(|a| a.username == username) {
        return Err(fail(
            names::DUPLICATE_USERNAME,
            format!("Username {username} already exists."),
        ));
    }
    let id = ctx.c.add_account(username, initiator, target, attributes);
    ctx.dirty = true;
    Ok(json!({ "accountID": id, "account": account_json(ctx.c, id) }))
}
